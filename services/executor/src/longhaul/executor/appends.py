"""One-off appends outside a turn (a child's result on its parent, a stop, a poison failure):
append while a condition on the state still holds, re-deciding on conflict (through the trace
repository).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState

log = logging.getLogger(__name__)


async def append_while(
    traces: Repository[TraceState],
    state: TraceState,
    event: ev.TraceEvent,
    wanted: Callable[[TraceState], bool],
    *,
    actor: str,
) -> bool:
    """Append ``event`` to ``state``'s trace if ``wanted(state)``; True if it was appended.

    ``state`` is caught up and re-decided after each conflict, and applied on success;
    :class:`ConcurrencyError` once the repository's retry policy is spent.
    """

    def decide(current: TraceState) -> list[ev.Event]:
        return [event] if wanted(current) else []

    try:
        written = await traces.save(state.trace_id, state, decide, actor=actor)
    except InvalidTransition as exc:
        log.info("not appending %s to %s: %s", event.type, state.trace_id, exc)
        return False
    return bool(written)
