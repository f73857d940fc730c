"""Liveness, readiness and Prometheus metrics (unauthenticated: meant for probes/scrapers)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from longhaul.gateway.runtime import runtime_of
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

router = APIRouter(tags=["health"])

READY_TIMEOUT_S = 2.0


class Health(BaseModel):
    status: str
    checks: dict[str, str] = {}


@router.get("/healthz", response_model=Health, summary="The process is up")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    summary="NATS connected and the event stream present",
    responses={503: {"model": Health, "description": "not ready"}},
)
async def readyz(request: Request) -> JSONResponse:
    runtime = runtime_of(request.app)
    checks = {"nats": "down", "stream": "unknown"}
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
    ready = all(value == "ok" for value in checks.values())
    body = Health(status="ok" if ready else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(request: Request) -> Response:
    runtime = runtime_of(request.app)
    if runtime.ctx is not None:
        await runtime.metrics.refresh_consumer_lag(runtime.ctx.conn)
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)
