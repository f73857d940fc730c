"""The durable :class:`EventSink`: the engine's events saved through the trace repository,
in order, then applied to the engine's state.

Every event is checked against the state *before* it is appended (the repository's rule: a
bad log would poison the trace for every reader), with one rule of the executor's own on top
(:func:`precheck`). When another writer got in first (a stop request, a child's result, a
human reply), the state is caught up from the log and the event re-appended if it still
applies; otherwise :class:`StaleState` ends the turn and the executor replays afresh.

A tool's result goes through :meth:`TraceSink.emit_behind` (write-behind): its append is in
flight while the engine builds and sends the next model request, which has no effect outside
the process; so does an assistant message whose calls are all ``read_only``, while they run.
The next append, or a call with effects, waits for it first (:meth:`TraceSink.settle`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from longhaul.agent.contract import StaleState
from longhaul.core.repository import (
    ConcurrencyError,
    Recorded,
    Repository,
    RetryPolicy,
    SaveInFlight,
)
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState
from longhaul.executor.background_writes import TurnBackgroundWrites
from longhaul.executor.metrics import ExecutorMetrics

log = logging.getLogger(__name__)

RETRY = RetryPolicy(attempts=16)
"""A turn's events race with every other writer of the trace (children finishing, replies,
stops): more attempts than a one-off write before the turn gives up as stale."""


def executor_rule(state: TraceState, event: ev.TraceEvent) -> None:
    """The executor's own rule on top of the fold's (which the repository checks)."""
    if (
        isinstance(event, ev.Waiting)
        and event.reason == "subtraces"
        and not (state.running_subtraces())
    ):
        # The last child finished while the turn decided to wait: nothing would wake it.
        raise InvalidTransition("no sub-trace is running any more", code="conflict")


def precheck(state: TraceState, event: ev.TraceEvent) -> None:
    """Raise :class:`InvalidTransition` if ``event`` could not apply to ``state``."""
    executor_rule(state, event)
    state.check(event)


class HeldLease(Protocol):
    """What the sink needs of the turn's lease (:class:`~longhaul.executor.leases.Lease`)."""

    lost: asyncio.Event


class TraceSink:
    def __init__(
        self,
        traces: Repository[TraceState],
        state: TraceState,
        *,
        actor: str,
        lease: HeldLease,
        metrics: ExecutorMetrics,
        background_writes: TurnBackgroundWrites,
    ) -> None:
        self.repository = traces.taking_snapshots(background_writes.snapshots)
        self.state = state
        self.actor = actor
        self.lease = lease
        self.metrics = metrics
        self.background_writes = background_writes
        self.appended = 0
        self._in_flight: SaveInFlight[TraceState] | None = None

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        await self.settle()
        for event in events:
            await self._emit_one(self.state, event)

    async def emit_behind(self, events: Sequence[ev.TraceEvent]) -> None:
        """Like :meth:`emit`, except that the last event is applied at once and its append
        left in flight: the engine builds its next model request meanwhile. The next
        :meth:`emit` or :meth:`settle` waits for it first, so the log's order is the
        engine's order and nothing follows an event that did not land."""
        await self.settle()
        *first, last = events
        for event in first:
            await self._emit_one(self.state, event)
        state = self.state
        executor_rule(state, last)  # the fold's own rules: begin_save checks them
        if self.lease.lost.is_set():
            raise StaleState(f"lease on trace {state.trace_id} lost")
        self._in_flight = await self.repository.begin_save(
            state.trace_id, state, last, actor=self.actor, correlation_id=state.task_id
        )

    async def settle(self) -> None:
        """Wait for the append :meth:`emit_behind` left in flight (if any). When another
        writer got in first, the turn's state holds an event the log does not have at that
        place: the event is appended again after the other writer's (if it still applies)
        and :class:`StaleState` ends the turn, so the executor replays afresh."""
        in_flight, self._in_flight = self._in_flight, None
        if in_flight is None:
            return
        try:
            await in_flight.settle(self._applied)
        except ConcurrencyError:
            event = in_flight.event
            assert isinstance(event, ev.TraceEvent)
            fresh = await self.repository.load(self.state.trace_id)
            await self._emit_one(fresh, event, conflicted=True)
            raise StaleState(
                f"trace {fresh.trace_id} moved while {event.type} was in flight; "
                "appended again after the other writer's events"
            ) from None

    async def _emit_one(
        self, state: TraceState, event: ev.TraceEvent, *, conflicted: bool = False
    ) -> None:
        if conflicted:
            self._recheck(state, event)
        else:
            executor_rule(state, event)  # the fold's own rules: save checks them
        retried = False

        def decide(current: TraceState) -> list[ev.Event]:
            if retried:
                self._recheck(current, event)
            if self.lease.lost.is_set():
                raise StaleState(f"lease on trace {current.trace_id} lost")
            return [event]

        def on_conflict(_: TraceState) -> None:
            nonlocal retried
            retried = True

        try:
            await self.repository.save(
                state.trace_id,
                state,
                decide,
                actor=self.actor,
                correlation_id=state.task_id,
                retry=RETRY,
                on_conflict=on_conflict,
                on_applied=self._applied,
            )
        except ConcurrencyError as exc:
            raise StaleState(f"trace {state.trace_id}: too many concurrent writers") from exc

    def _recheck(self, state: TraceState, event: ev.TraceEvent) -> None:
        """After a lost race: does the event still apply to the trace as it now is?"""
        log.info("trace %s moved under the turn", state.trace_id)
        try:
            precheck(state, event)
        except InvalidTransition as exc:
            self.metrics.conflicts.labels(outcome="stale").inc()
            raise StaleState(f"{event.type} no longer applies: {exc}") from exc
        self.metrics.conflicts.labels(outcome="reappended").inc()

    def _applied(self, state: TraceState, recorded: Recorded, previous: int) -> None:
        self.appended += 1
        self.metrics.events.inc()
        event = recorded.event
        if isinstance(event, ev.MessageAppended) and event.role == "assistant":
            self.metrics.steps.inc()
        self.background_writes.after_append(state)
