"""Server-sent events over HTTP: the response every event stream (a trace's, a task's, a
remote trace's) answers with, and the query and header that say where it starts.

SSE ids are stream sequences: a client that reconnects with ``Last-Event-ID`` (browsers do it
by themselves) continues exactly after the last event it saw. ``?after=`` does the same for
the first connection; the header wins when both are present.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, NamedTuple

from fastapi import Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from longhaul.domain.events import Aggregate
from longhaul.gateway.batching import FLUSH_MS_MAX
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.streams import ClosingStreamingResponse, aggregate_stream, sse_frame

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SSE_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "text/event-stream. Stored events: `id: <stream sequence>`, `event: <type>`, "
            "`data: <event JSON>`. Token deltas: `event: live` (no id). "
            "`event: heartbeat` when idle. The schema describes one event (``sse_schema``)."
        ),
        "content": {"text/event-stream": {"schema": {"type": "object"}}},
    }
}
RETRY_MS = 1000
SSE_ROUTE: dict[str, Any] = {"response_class": StreamingResponse, "responses": SSE_DOC}
"""What every event-stream route declares (``@router.get(path, summary=…, **SSE_ROUTE)``)."""

FLUSH_MS_DOC = (
    "merge token deltas into one `live` frame per this many milliseconds (0: each delta "
    "as the executor publishes it, every pipeline.streaming.flush_interval_ms; at most "
    f"{FLUSH_MS_MAX})"
)
FlushMs = Annotated[int, Query(ge=0, le=FLUSH_MS_MAX, description=FLUSH_MS_DOC)]


def ws_flush_ms(raw: str | None) -> int:
    """``?flush_ms=`` of a WebSocket, checked by hand: FastAPI refuses a WebSocket's bad query
    with a bare 1008 close, and a client deserves the same 422 an SSE request gets."""
    if raw is None:
        return 0
    if not (raw.isascii() and raw.isdigit()) or int(raw) > FLUSH_MS_MAX:
        raise ApiError(
            422, "invalid_request", f"flush_ms must be an integer from 0 to {FLUSH_MS_MAX}"
        )
    return int(raw)


def resume_point(last_event_id: str | None, after: int | None) -> int:
    if last_event_id is None:
        return after or 0
    value = last_event_id.strip()
    # Headers arrive latin-1 decoded: "²" (byte 0xB2) is a Unicode digit int() refuses.
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        raise ApiError(
            400, "bad_request", "Last-Event-ID must be a stream sequence (a non-negative integer)"
        )
    return int(value)


class StreamStart(NamedTuple):
    after: int
    """stream sequence after which to start"""
    follow: bool
    """keep the stream open for new events (and token deltas)"""


def stream_start(
    last_event_id: Annotated[str | None, Header(max_length=32)] = None,
    after: Annotated[int | None, Query(ge=0, le=2**63 - 1)] = None,
    follow: Annotated[bool, Query(description="false: end after the stored events")] = True,
) -> StreamStart:
    """The query and header of an SSE endpoint (declare it after the principal, so that an
    unauthenticated request is refused before its Last-Event-ID is looked at)."""
    return StreamStart(resume_point(last_event_id, after), follow)


StreamFrom = Annotated[StreamStart, Depends(stream_start)]


async def _client_gone(request: Request) -> None:
    """Completes when the HTTP client disconnects (a GET has no body left to read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def sse_response(
    runtime: Runtime,
    aggregate: Aggregate,
    aggregate_id: str,
    start: StreamStart,
    request: Request,
    flush_ms: int = 0,
) -> StreamingResponse:
    async def body() -> Any:
        gauge = runtime.metrics.streams.labels("sse")
        gauge.inc()
        try:
            yield b"retry: %d\n\n" % RETRY_MS
            items = aggregate_stream(
                runtime,
                aggregate,
                aggregate_id,
                after=start.after,
                follow=start.follow,
                live=start.follow,
                until=_client_gone(request),
                flush_ms=flush_ms,
            )
            async with contextlib.aclosing(items):
                async for item in items:
                    yield sse_frame(item)
        finally:
            gauge.dec()

    return ClosingStreamingResponse(body(), media_type="text/event-stream", headers=SSE_HEADERS)
