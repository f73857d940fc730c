"""Poison wake-ups: an event whose handling keeps failing (an undecodable payload in the
trace's log, an event the fold rejects, a bug) is terminated after N attempts and recorded on
the trace as ``Failed(error=<reason>)``, so the trace ends visibly instead of being retried
forever, and its parent is told.

A trace whose log does not fold cannot be positioned through the fold, so the failure is
appended after the log's raw last message (its ``Nats-Msg-Id`` carries ``n``; the subject
count stands in when it has none) and the index entry is written by hand.
"""

from __future__ import annotations

import logging

import msgspec
from longhaul.core.index import TraceIndex
from longhaul.core.store import ConcurrencyError, EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.executor.appends import append_while
from nats.js.errors import NotFoundError

log = logging.getLogger(__name__)

POISON_STOP_REASON = "poison_event"
ERROR_LIMIT = 2000


class _Tail(msgspec.Struct):
    type: str = ""
    stop_reason: str | None = None


async def raw_position(store: EventStore, trace_id: str) -> tuple[Position, bytes] | None:
    """The trace log's last stream sequence and event number, and its last payload."""
    conn = store.conn
    subject = conn.names.aggregate_filter("trace", trace_id)
    try:
        last = await conn.js.get_last_msg(conn.names.stream, subject)
    except NotFoundError:
        return None
    msg_id = (last.headers or {}).get("Nats-Msg-Id", "")
    _, _, n_text = msg_id.rpartition(":")
    if n_text.isdigit():
        n = int(n_text)
    else:
        info = await conn.js.stream_info(conn.names.stream, subjects_filter=subject)
        n = sum((info.state.subjects or {}).values())
    return Position(int(last.seq or 0), n), last.data or b""


def _already_recorded(payload: bytes) -> bool:
    try:
        tail = msgspec.json.decode(payload, type=_Tail)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    return tail.type == "failed" and tail.stop_reason == POISON_STOP_REASON


async def record_poison(
    store: EventStore, index: TraceIndex, trace_id: str, reason: str, *, actor: str
) -> str | None:
    """Fail the trace with ``reason``. Returns the parent to tell when the trace's log does
    not fold (a foldable trace's ``failed`` wake-up tells its parent the usual way)."""
    failed = ev.Failed(error=reason[:ERROR_LIMIT], stop_reason=POISON_STOP_REASON)
    try:
        state = await store.load_trace(trace_id)
    except Exception as exc:  # the log itself is what is broken
        log.warning("trace %s does not fold (%s): recording the failure raw", trace_id, exc)
        return await _record_raw(store, index, trace_id, failed, actor=actor)
    if state.exists:
        await append_while(
            store, state, failed, lambda s: s.status in ("running", "waiting"), actor=actor
        )
        await index.update(state)
    return None


async def _record_raw(
    store: EventStore, index: TraceIndex, trace_id: str, failed: ev.Failed, *, actor: str
) -> str | None:
    found = await raw_position(store, trace_id)
    if found is None:
        return None
    position, payload = found
    if _already_recorded(payload):
        return None
    try:
        [recorded] = await store.append("trace", trace_id, [failed], expected=position, actor=actor)
    except ConcurrencyError:
        return None  # someone else wrote after the broken event; the next attempt re-decides
    previous = await index.get(trace_id)
    entry_state = TraceState(
        trace_id=trace_id,
        status="failed",
        error=failed.error,
        stop_reason=POISON_STOP_REASON,
        stream_seq=recorded.seq,
        version=recorded.event.n,
        updated_at=recorded.event.ts,
    )
    if previous is not None:
        entry_state.name = previous.name
        entry_state.owner = previous.owner
        entry_state.parent_trace_id = previous.parent_trace_id
        entry_state.task_id = previous.task_id
        entry_state.created_at = previous.created_at
    await index.update(entry_state)
    return entry_state.parent_trace_id
