"""One-off appends outside a turn (a child's result on its parent, a stop, a poison failure):
append while a condition on the state still holds, catching up and re-deciding on conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from longhaul.core import events as ev
from longhaul.core.state import InvalidTransition, TraceState
from longhaul.core.store import ConcurrencyError, EventStore, Position

log = logging.getLogger(__name__)

APPEND_ATTEMPTS = 8


async def append_while(
    store: EventStore,
    state: TraceState,
    event: ev.TraceEvent,
    wanted: Callable[[TraceState], bool],
    *,
    actor: str,
) -> bool:
    """Append ``event`` to ``state``'s trace if ``wanted(state)``; True if it was appended.

    ``state`` is caught up and re-checked after each conflict, and applied on success.
    """
    for _ in range(APPEND_ATTEMPTS):
        if not wanted(state):
            return False
        try:
            state.check(event)
        except InvalidTransition as exc:
            log.info("not appending %s to %s: %s", event.type, state.trace_id, exc)
            return False
        try:
            [recorded] = await store.append(
                "trace", state.trace_id, [event],
                expected=Position(state.stream_seq, state.version), actor=actor,
            )
        except ConcurrencyError:
            await store.catch_up("trace", state.trace_id, state)
            continue
        state.apply(recorded.event, recorded.seq)
        return True
    raise ConcurrencyError(f"trace {state.trace_id}: could not append {event.type}")
