"""The FastAPI application: routers, middleware, error handlers, and a lifespan that owns
the NATS connection and the background loops (:mod:`longhaul.gateway.background`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from longhaul.core.config import LonghaulConfig
from longhaul.core.service import open_context
from longhaul.core.telemetry import tracing_enabled
from longhaul.gateway.auth import KeyRing
from longhaul.gateway.background import BackgroundLoops
from longhaul.gateway.bodylimit import BodyLimitMiddleware
from longhaul.gateway.errors import install_error_handlers
from longhaul.gateway.metrics import GatewayMetrics, RequestObserver
from longhaul.gateway.openapi import configured_openapi, model_pattern
from longhaul.gateway.protocols import ag_ui, openai
from longhaul.gateway.protocols.a2a import A2ASurface
from longhaul.gateway.protocols.mcp import McpSurface
from longhaul.gateway.quota import ActiveQuota
from longhaul.gateway.ratelimit import RateLimiter
from longhaul.gateway.routers import (
    admin,
    bundles,
    evals,
    experiences,
    files,
    health,
    inbox,
    info,
    notifications,
    remote_traces,
    runs,
    schedules,
    skills,
    tasks,
    tools,
    trace_events,
    traces,
    triggers,
    usage,
    viewer,
    waiting,
)
from longhaul.gateway.runtime import Runtime
from longhaul.llm.registry import BUILTIN_SCRIPTS, CODECS, ModelRegistry
from longhaul.llm.telemetry import capture_content
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.trace import Span

log = logging.getLogger(__name__)

DESCRIPTION = """\
HTTP ingress of longhaul. Writes answer **202** once their event is durably on the trace's
(or task's) log; watch what happens next on `/events` (SSE) or `/watch` (WebSocket).
Authenticate with `Authorization: Bearer <key>` (keys from `LONGHAUL_API_KEYS`); every
error is `{"error": {"code", "message", "details"}}`.
"""


def create_app(config: LonghaulConfig, *, heartbeat_s: float = 15.0) -> FastAPI:
    gateway = config.gateway
    runtime = Runtime(
        config=config,
        keys=KeyRing(gateway.api_keys),
        metrics_keys=KeyRing(gateway.metrics_keys),
        admin_keys=KeyRing(gateway.admin_keys),
        limiter=RateLimiter(gateway.rate_limit_per_minute),
        webhook_limiter=RateLimiter(gateway.webhook_rate_limit_per_minute),
        quota=ActiveQuota(gateway.max_active_traces_per_key),
        metrics=GatewayMetrics(),
        heartbeat_s=heartbeat_s,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        ctx = await open_context("gateway", config)
        runtime.connect(ctx)
        loops = BackgroundLoops(runtime, ctx)
        await loops.start()
        log.info("gateway connected to %s", config.nats.url)
        try:
            async with ModelRegistry(config.models) as runtime.models, mcp.running():
                yield
        finally:
            runtime.models = None
            runtime.draining.set()
            await loops.stop()
            await ctx.close()
            runtime.ctx = None

    app = FastAPI(
        title="longhaul gateway",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.openapi = configured_openapi(  # type: ignore[method-assign]
        app,
        config.verifier.commands,
        config.memory.categories,
        model_pattern({*CODECS, "local", *config.models.providers}, BUILTIN_SCRIPTS),
    )
    mcp = McpSurface(runtime)
    mcp.mount(app)
    A2ASurface(runtime).mount(app)
    install_error_handlers(app, {openai.PREFIX + "/": openai.openai_error})
    for router in (
        bundles.router,
        traces.router,
        remote_traces.router,
        files.router,
        trace_events.router,
        runs.router,
        inbox.router,
        notifications.router,
        waiting.router,
        usage.router,
        tasks.router,
        tasks.versioned_router,
        info.router,
        tools.router,
        experiences.router,
        evals.router,
        evals.eval_tasks_router,
        schedules.router,
        triggers.router,
        skills.router,
        health.router,
        admin.router,
        viewer.router,
        openai.router,
        ag_ui.router,
    ):
        app.include_router(router)
    # Added last is outermost: the observer sees every response (413s and CORS refusals
    # included); the body limit runs before routing.
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=gateway.max_body_bytes,
        max_upload_bytes=gateway.max_upload_bytes,
    )
    if gateway.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=gateway.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
        )
    app.add_middleware(RequestObserver, metrics=runtime.metrics)
    if tracing_enabled():
        # A server span per request, continuing a client's ``traceparent``; the events a
        # request appends carry it on (``longhaul.core.telemetry``).
        FastAPIInstrumentor.instrument_app(
            app,
            excluded_urls="healthz,readyz,metrics",
            exclude_spans=["receive", "send"],
            server_request_hook=hide_query,
        )
    return app


_URL_ATTRIBUTES = ("http.url", "http.target", "url.full")


def hide_query(span: Span | None, _scope: dict[str, Any]) -> None:
    """A query string can carry what a user searched for (``/api/experiences?q=…``): like
    message contents, it goes on a span only with the content opt-in."""
    if span is None or not span.is_recording() or capture_content():
        return
    recorded = getattr(span, "attributes", None) or {}
    for name in _URL_ATTRIBUTES:
        value = recorded.get(name)
        if isinstance(value, str) and "?" in value:
            span.set_attribute(name, value.split("?", 1)[0])
    if recorded.get("url.query"):
        span.set_attribute("url.query", "")
