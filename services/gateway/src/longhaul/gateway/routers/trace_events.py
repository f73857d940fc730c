"""Live event streams of a trace: SSE (``/events``, see :mod:`longhaul.gateway.sse`) and
WebSocket (``/watch``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

from fastapi import (
    APIRouter,
    Query,
    Request,
    WebSocket,
    WebSocketDisconnect,
)
from fastapi.responses import StreamingResponse
from longhaul.gateway import access
from longhaul.gateway.auth import (
    authenticate_token,
    check_origin,
    enforce_rate_limit,
)
from longhaul.gateway.deps import CurrentRuntime, OwnedTraceId
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.runtime import runtime_of
from longhaul.gateway.sse import SSE_ROUTE, FlushMs, StreamFrom, sse_response, ws_flush_ms
from longhaul.gateway.streams import (
    aggregate_stream,
    ws_frame,
)

router = APIRouter(tags=["events"], responses=ERROR_RESPONSES)


@router.get(
    "/api/traces/{trace_id}/events",
    summary="Server-sent events of a trace, resumable with Last-Event-ID",
    **SSE_ROUTE,
)
async def trace_events(
    trace_id: OwnedTraceId,
    request: Request,
    runtime: CurrentRuntime,
    start: StreamFrom,
    flush_ms: FlushMs = 0,
) -> StreamingResponse:
    return sse_response(runtime, "trace", trace_id, start, request, flush_ms)


WS_CLOSE_BASE = 4000
"""Refusals close the socket with 4000 + the HTTP status (4401, 4403, 4404 …)."""


@router.websocket("/api/traces/{trace_id}/watch")
async def trace_watch(
    websocket: WebSocket,
    trace_id: str,
    after: Annotated[int, Query(ge=0)] = 0,
    api_key: Annotated[
        str | None, Query(description="for browsers, which cannot set headers")
    ] = None,
) -> None:
    """Same content as ``/events``, one JSON object per text frame; resume with ``?after=``;
    ``?flush_ms=`` as on ``/events``."""
    runtime = runtime_of(websocket.app)
    await websocket.accept()
    try:
        check_origin(
            websocket.headers.get("origin"),
            websocket.headers.get("host"),
            runtime.config.gateway.cors_origins,
        )
        authorization = websocket.headers.get("authorization", "")
        bearer = authorization.lower().startswith("bearer ")
        token = authorization[7:].strip() if bearer else api_key
        peer = websocket.client.host if websocket.client else None
        principal = authenticate_token(runtime.keys, token, peer, websocket.headers.get("host"))
        enforce_rate_limit(runtime.limiter, principal)
        await access.require_trace_owner(runtime, principal, trace_id)
        flush_ms = ws_flush_ms(websocket.query_params.get("flush_ms"))
    except ApiError as exc:
        await websocket.send_json(
            {"error": {"code": exc.code, "message": exc.message, "details": exc.details}}
        )
        await websocket.close(code=WS_CLOSE_BASE + exc.status, reason=exc.code)
        return

    async def client_gone() -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                await websocket.receive_text()

    gauge = runtime.metrics.streams.labels("websocket")
    gauge.inc()
    try:
        items = aggregate_stream(
            runtime,
            "trace",
            trace_id,
            after=after,
            follow=True,
            live=True,
            until=client_gone(),
            flush_ms=flush_ms,
        )
        async with contextlib.aclosing(items):
            async for item in items:
                await websocket.send_text(ws_frame(item))
    except (WebSocketDisconnect, RuntimeError):
        return  # the client left mid-send
    finally:
        gauge.dec()
    with contextlib.suppress(RuntimeError, asyncio.CancelledError):
        await websocket.close(code=1001 if runtime.draining.is_set() else 1000)
