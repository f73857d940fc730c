"""Liveness and readiness (unauthenticated: meant for probes) and Prometheus metrics (the
operator's scraper key: they total every key's traces, see ``auth.metrics_reader``)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from longhaul.core.connection import Connection
from longhaul.core.service import ServiceContext
from longhaul.gateway.auth import metrics_reader
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.liveness import READY_TIMEOUT_S, open_circuits, presences
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.storage import readiness
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

router = APIRouter(tags=["health"])

EXECUTORS_CACHE_S = 1.5
"""How long a look at the executors' presence keys is reused: probes may come often."""


async def _executors(runtime: Runtime, conn: Connection) -> tuple[str, str]:
    """``ok`` while at least one executor is consuming, else the reason; and ``ok`` while
    every executor's tools run sandboxed, else the first other state (cached briefly)."""
    now = time.monotonic()
    cached = runtime.executors_checked
    if cached is not None and now - cached[0] < EXECUTORS_CACHE_S:
        return cached[1]
    try:
        states = await asyncio.wait_for(presences(conn), READY_TIMEOUT_S)
        present = "ok" if states else "none consuming: no executor is running"
        sandbox = next((s for s in states if s != "ok"), "ok" if states else "unknown")
    except Exception as exc:  # any failure means "not ready", with the reason
        present = sandbox = f"unknown: {type(exc).__name__}"
    runtime.executors_checked = (now, (present, sandbox))
    return present, sandbox


async def _circuits(runtime: Runtime, conn: Connection) -> str:
    """``ok``, or the providers whose circuit is open (their traces run on fallbacks)."""
    try:
        names = await asyncio.wait_for(
            open_circuits(conn, runtime.config.models.circuit), READY_TIMEOUT_S
        )
    except Exception as exc:  # reported, like the other checks
        return f"unknown: {type(exc).__name__}"
    return f"open: {', '.join(names)}" if names else "ok"


_ADVISORY = frozenset({"sandbox", "storage", "circuits"})
"""Checks that are reported but do not make the gateway unready."""


async def _storage(ctx: ServiceContext) -> str:
    """``ok``, or why no new run may start (``longhaul.core.storage``)."""
    try:
        status = await asyncio.wait_for(ctx.storage.status(), READY_TIMEOUT_S)
    except Exception as exc:  # reported, like the other checks
        return f"unknown: {type(exc).__name__}"
    return readiness(status)


def refused(sandbox: str) -> bool:
    """Whether an executor's sandbox state means its tool processes are all refused (not
    ``ok``, perhaps with a note, not the operator's ``off`` opt-out: they run unconfined)."""
    return not sandbox.startswith(("ok", "off"))


class Health(BaseModel):
    status: str
    checks: dict[str, str] = {}


@router.get("/healthz", response_model=Health, summary="The process is up")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    summary="NATS connected, the event stream present and an executor consuming "
    "(and whether their tools run sandboxed, whether the stores have room, and the model "
    "providers whose circuit is open)",
    responses={
        200: {
            "model": Health,
            "description": "ready: status ok, or degraded (an executor's tool processes are "
            "refused: no sandbox) or storage_full, with the reason in checks",
        },
        503: {"model": Health, "description": "not ready"},
    },
)
async def readyz(runtime: CurrentRuntime) -> JSONResponse:
    checks = {"nats": "down", "stream": "unknown", "executors": "unknown"}
    ctx = runtime.ctx
    if ctx is not None and ctx.conn.nc.is_connected:
        checks["nats"] = "ok"
        try:
            await asyncio.wait_for(
                ctx.conn.js.stream_info(ctx.conn.names.stream), timeout=READY_TIMEOUT_S
            )
            checks["stream"] = "ok"
        except Exception as exc:  # any failure means "not ready", with the reason
            checks["stream"] = f"missing: {type(exc).__name__}"
        checks["executors"], checks["sandbox"] = await _executors(runtime, ctx.conn)
        checks["storage"] = await _storage(ctx)
        checks["circuits"] = await _circuits(runtime, ctx.conn)
    # no sandbox is reported, not a reason to stop traffic: bash is refused, the rest works;
    # full storage neither: reads, replies and the deletes that free room still work; nor an
    # open circuit: traces move to their fallback models
    ready = all(value == "ok" for name, value in checks.items() if name not in _ADVISORY)
    status = "ok" if ready else "unavailable"
    if ready and checks.get("storage", "").startswith("full"):
        status = "storage_full"
    elif ready and refused(checks.get("sandbox", "ok")):
        status = "degraded"
    body = Health(status=status, checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics (Bearer: one of gateway.metrics_keys)",
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **ERROR_RESPONSES,
    },
    dependencies=[Depends(metrics_reader)],
)
async def metrics(runtime: CurrentRuntime) -> Response:
    if runtime.ctx is not None:
        await runtime.metrics.refresh_consumer_lag(runtime.ctx.conn)
        await runtime.metrics.refresh_storage(runtime.ctx.storage)
        with contextlib.suppress(Exception):  # metrics render even when NATS is unwell
            circuits = open_circuits(runtime.ctx.conn, runtime.config.models.circuit)
            runtime.metrics.refresh_circuits(await asyncio.wait_for(circuits, READY_TIMEOUT_S))
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)
