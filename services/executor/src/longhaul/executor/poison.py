"""Poison wake-ups: a wake-up whose handling keeps failing (a bug, a tool that crashes the
turn) is terminated after N attempts and recorded on the trace as ``Failed(error=<reason>)``,
so the trace ends visibly instead of being retried forever; its ``failed`` event tells its
parent the usual way.

A broken *event* is not poison: every read of a log skips what does not decode or cannot apply
and records it as a fault on the trace (``longhaul.domain.state.faults``), so the trace, its
readers and this executor keep working.
"""

from __future__ import annotations

from longhaul.core.index import TraceIndex
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.executor.appends import append_while

POISON_STOP_REASON = "poison_event"
ERROR_LIMIT = 2000


async def record_poison(
    traces: Repository[TraceState], index: TraceIndex, trace_id: str, reason: str, *, actor: str
) -> None:
    """Fail the trace with ``reason`` (if it still runs or waits)."""
    state = await traces.load(trace_id)
    if not state.exists:
        return
    failed = ev.Failed(error=reason[:ERROR_LIMIT], stop_reason=POISON_STOP_REASON)
    await append_while(
        traces, state, failed, lambda s: s.status in ("running", "waiting"), actor=actor
    )
    await index.update(state)
