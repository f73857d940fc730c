"""Wait deadlines: a question or an approval nobody answered in time gets its default action.

The deadline is on the log (``waiting`` {deadline, on_deadline}) and in the trace's index
entry, so no timer has to survive anything: the sweeper (one replica at a time, whichever is
alive after a kill -9) reads the entries of the traces under way, and for one waiting past
its deadline appends the action — ``deny``: each pending call denied, a question answered
that nobody replied; ``stop``: ``stop_requested``. The events are decided from the folded
state and checked against it, appended at its position, so two sweepers (or a person
answering at the same moment) can never both act: the loser's check finds no wait left.
"""

from __future__ import annotations

import logging
import time

from longhaul.core.repository import ConcurrencyError, Repository
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState

log = logging.getLogger(__name__)

BY_DEADLINE = "deadline"
"""``by`` of an answer the deadline gave (a person's answer names their key)."""
NO_REPLY = (
    "No one answered before the deadline. Go on without an answer: choose a safe default "
    "or explain what you could not do."
)
NO_DECISION = "no decision before the deadline"
STOP_REASON = "wait_deadline"


def overdue(state: TraceState, now: float) -> list[ev.TraceEvent]:
    """The default action of the trace's wait if its deadline has passed, else nothing."""
    wait = state.wait
    if state.status != "waiting" or wait.deadline is None or wait.deadline > now:
        return []
    if wait.on_deadline == "stop":
        return [] if state.stop_requested else [ev.StopRequested(reason=STOP_REASON)]
    if wait.reason == "human":
        return [ev.HumanReplied(content=NO_REPLY, by=BY_DEADLINE)]
    if wait.reason == "approval":
        return [
            ev.ToolDecided(tool_call_id=call, approved=False, reason=NO_DECISION, by=BY_DEADLINE)
            for call in state.approval_pending
        ]
    return []


class WaitDeadlines:
    def __init__(self, traces: Repository[TraceState], *, actor: str) -> None:
        self.traces = traces
        self.actor = actor

    async def take(self, trace_id: str) -> bool:
        """Take the trace's overdue default action; True if this call appended it."""
        state = await self.traces.load(trace_id)
        try:
            written = await self.traces.save(
                trace_id, state, lambda current: overdue(current, time.time()), actor=self.actor
            )
        except (InvalidTransition, ConcurrencyError) as exc:  # answered meanwhile
            log.info("trace %s: deadline action not taken (%s)", trace_id, exc)
            return False
        if written:
            log.info("trace %s: wait deadline passed, %s", trace_id, state.wait.on_deadline)
        return bool(written)
