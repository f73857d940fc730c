"""The durable :class:`EventSink`: the engine's events appended to JetStream, in order, with
the store's optimistic concurrency, then applied to the engine's state.

Every event is checked against the state *before* it is appended, so an event the fold would
reject never reaches the log (a bad log would poison the trace for every reader). Messages, the
bulk of a long trace, get the fold's own O(1) ``TraceState.check_message``; rarer events are
probed on a copy with ``TraceState.check``. When another writer got in first (a stop request, a
child's result, a human reply), the state is caught up from the log and the event re-appended
if it still applies; otherwise :class:`StaleState` ends the turn and the executor replays
afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from longhaul.agent.contract import StaleState
from longhaul.core import events as ev
from longhaul.core.state import InvalidTransition, TraceState
from longhaul.core.store import ConcurrencyError, EventStore, Position
from longhaul.executor.leases import Lease
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.upkeep import TurnUpkeep

log = logging.getLogger(__name__)

MAX_CONFLICT_RETRIES = 16


def precheck(state: TraceState, event: ev.TraceEvent) -> None:
    """Raise :class:`InvalidTransition` if ``event`` could not apply to ``state``."""
    if isinstance(event, ev.MessageAppended):
        state.check_message(event)
        return
    if isinstance(event, ev.Waiting) and event.reason == "subtraces" and not (
        state.running_subtraces()
    ):
        # The last child finished while the turn decided to wait: nothing would wake it.
        raise InvalidTransition("no sub-trace is running any more", code="conflict")
    state.check(event)


class TraceSink:
    def __init__(
        self,
        store: EventStore,
        state: TraceState,
        *,
        actor: str,
        lease: Lease,
        metrics: ExecutorMetrics,
        upkeep: TurnUpkeep,
    ) -> None:
        self.store = store
        self.state = state
        self.actor = actor
        self.lease = lease
        self.metrics = metrics
        self.upkeep = upkeep
        self.appended = 0

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        for event in events:
            await self._emit_one(event)

    async def _emit_one(self, event: ev.TraceEvent) -> None:
        state = self.state
        precheck(state, event)
        for _ in range(MAX_CONFLICT_RETRIES):
            if self.lease.lost.is_set():
                raise StaleState(f"lease on trace {state.trace_id} lost")
            previous = state.version
            try:
                [recorded] = await self.store.append(
                    "trace",
                    state.trace_id,
                    [event],
                    expected=Position(state.stream_seq, state.version),
                    actor=self.actor,
                    correlation_id=state.task_id,
                )
            except ConcurrencyError:
                await self._catch_up(event)
                continue
            state.apply(recorded.event, recorded.seq)
            self.appended += 1
            self.metrics.events.inc()
            if isinstance(event, ev.MessageAppended) and event.role == "assistant":
                self.metrics.steps.inc()
            self.upkeep.after_append(state, previous)
            return
        raise StaleState(f"trace {state.trace_id}: too many concurrent writers")

    async def _catch_up(self, event: ev.TraceEvent) -> None:
        state = self.state
        applied = await self.store.catch_up("trace", state.trace_id, state)
        log.info("trace %s moved by %d event(s) under the turn", state.trace_id, applied)
        try:
            precheck(state, event)
        except InvalidTransition as exc:
            self.metrics.conflicts.labels(outcome="stale").inc()
            raise StaleState(f"{event.type} no longer applies: {exc}") from exc
        self.metrics.conflicts.labels(outcome="reappended").inc()
