"""Live streams of an aggregate's events, shared by SSE and WebSocket.

Four sources are merged into one ordered-enough sequence: the aggregate's stored events
(an ordered consumer from ``after`` onward: no gap, no duplicate, whatever the reconnect
point), the trace's live token deltas (core NATS, not persisted, carrying no id so they never
move a client's resume point), ``subtree`` notices when the set of descendants waiting on a
person or a verifier changes (from the index mirror; no id either), and heartbeats when all
are quiet, which also reveal a vanished client. A stream ends when the client goes away, when
the gateway drains for shutdown, or (``follow=False``) once the stored events are exhausted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import msgspec
from longhaul.agent.contract import LiveUpdate
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.state import TaskState, TraceState
from longhaul.gateway.batching import DeltaBatcher
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.runtime import Runtime
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

log = logging.getLogger(__name__)

QUEUE_SIZE = 1024


class ClosingStreamingResponse(StreamingResponse):
    """A streaming response that closes its body generator however the response ends.
    Starlette leaves a body the client left mid-send suspended, and the subscriptions it holds
    would live on until the garbage collector found it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()


@dataclass(frozen=True)
class Item:
    kind: Literal["event", "live", "subtree", "heartbeat", "error", "end"]
    data: bytes = b"{}"
    seq: int | None = None
    type: str = ""


_END = Item("end")


async def aggregate_stream(
    runtime: Runtime,
    aggregate: Aggregate,
    aggregate_id: str,
    *,
    after: int,
    follow: bool,
    live: bool,
    until: Awaitable[object] | None = None,
    flush_ms: int = 0,
) -> AsyncGenerator[Item, None]:
    """Yield items until the client leaves (``until`` completes), the gateway drains, or —
    when not following — the stored events run out. ``flush_ms``: merge token deltas into
    one item per window of that many milliseconds (:mod:`longhaul.gateway.batching`)."""
    repository: Repository[TraceState] | Repository[TaskState] = (
        runtime.traces if aggregate == "trace" else runtime.tasks
    )
    queue: asyncio.Queue[Item] = asyncio.Queue(maxsize=QUEUE_SIZE)
    subscription: Subscription | None = None

    def emit_live(update: LiveUpdate) -> None:
        # Deltas are a courtesy: the persisted message carries the full text, so a slow
        # client loses deltas rather than holding the connection's memory hostage.
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(Item("live", msgspec.json.encode(update)))

    batcher = DeltaBatcher(emit_live, flush_ms)

    async def on_live(msg: Msg) -> None:
        try:
            update = msgspec.json.decode(msg.data, type=LiveUpdate)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        batcher.add(update)

    async def pump() -> None:
        try:
            source = (
                repository.watch(aggregate_id, after=after)
                if follow
                else repository.replay(aggregate_id, after=after)
            )
            # Closed here, not by the garbage collector: a follow holds an ordered consumer
            # whose unread messages would keep the connection's drain waiting at shutdown.
            async with contextlib.aclosing(source):
                async for recorded in source:
                    event = recorded.event
                    batcher.flush()  # the deltas of a window come before the message
                    await queue.put(Item("event", ev.encode(event), recorded.seq, event.type))
        except Exception as exc:  # reported to the client, which reconnects from its last id
            log.warning("event stream of %s %s failed: %s", aggregate, aggregate_id, exc)
            message = msgspec.json.encode({"code": "stream_failed", "message": str(exc)})
            await queue.put(Item("error", message))
        await queue.put(_END)

    def waits_key(mirror: IndexMirror) -> list[tuple[str, str | None]]:
        return [(e.trace_id, e.wait_reason) for e in mirror.waiting_below(aggregate_id)]

    async def subtree() -> None:
        """A notice whenever the waits below this trace change (and at once if any exist)."""
        mirror = runtime.mirror
        shown: list[tuple[str, str | None]] = []
        while True:
            waits = mirror.waiting_below(aggregate_id)
            key = [(e.trace_id, e.wait_reason) for e in waits]
            if key != shown:
                body = {
                    "waiting_below": [
                        {
                            "trace_id": e.trace_id,
                            "parent_trace_id": e.parent_trace_id,
                            "name": e.name,
                            "reason": e.wait_reason,
                        }
                        for e in waits
                    ]
                }
                await queue.put(Item("subtree", msgspec.json.encode(body)))
                shown = key
            await mirror.wait_until(partial(_differs, waits_key, shown))

    if live and aggregate == "trace":
        subscription = await runtime.service.conn.nc.subscribe(
            runtime.service.conn.names.live(aggregate_id), cb=on_live
        )
    pump_task = asyncio.create_task(pump(), name=f"stream-{aggregate_id}")
    subtree_task = (
        asyncio.create_task(subtree(), name=f"subtree-{aggregate_id}")
        if follow and aggregate == "trace"
        else None
    )
    stoppers: set[asyncio.Future[Any]] = {asyncio.ensure_future(runtime.draining.wait())}
    if until is not None:
        stoppers.add(asyncio.ensure_future(until))
    getter: asyncio.Future[Any] | None = None
    try:
        while True:
            if getter is None:
                getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait(
                {getter, *stoppers},
                timeout=runtime.heartbeat_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getter in done:
                item = getter.result()
                getter = None
                if item is _END:
                    return
                yield item
                if item.kind == "error":
                    return
            elif done:
                return
            else:
                yield Item("heartbeat", msgspec.json.encode({"ts": round(time.time(), 3)}))
    finally:
        batcher.close()
        for future in (getter, pump_task, subtree_task, *stoppers):
            if future is not None:
                future.cancel()
        # Shielded: the cancel scope of a response whose client left cancels every await in
        # here again, which would end the release half done.
        await asyncio.shield(_release([pump_task, subtree_task], subscription))


async def _release(
    tasks: list[asyncio.Task[None] | None], subscription: Subscription | None
) -> None:
    await asyncio.gather(*(task for task in tasks if task is not None), return_exceptions=True)
    if subscription is not None:
        with contextlib.suppress(Exception):
            await subscription.unsubscribe()


def _differs(
    key: Callable[[IndexMirror], list[tuple[str, str | None]]],
    shown: list[tuple[str, str | None]],
    mirror: IndexMirror,
) -> bool:
    return key(mirror) != shown


def sse_frame(item: Item) -> bytes:
    """``text/event-stream`` framing: stored events carry ``id`` = stream sequence."""
    if item.kind == "event":
        return b"id: %d\nevent: %s\ndata: %s\n\n" % (item.seq or 0, item.type.encode(), item.data)
    return b"event: %s\ndata: %s\n\n" % (item.kind.encode(), item.data)


def ws_frame(item: Item) -> str:
    """One JSON text frame; same content as the SSE frame."""
    if item.kind == "event":
        head = b'{"id":%d,"event":"%s","data":' % (item.seq or 0, item.type.encode())
    else:
        head = b'{"event":"%s","data":' % item.kind.encode()
    return (head + item.data + b"}").decode()
