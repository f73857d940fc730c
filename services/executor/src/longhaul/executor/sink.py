"""The durable :class:`EventSink`: the engine's events saved through the trace repository,
in order, then applied to the engine's state.

Every event is checked against the state *before* it is appended (the repository's rule: a
bad log would poison the trace for every reader), with one rule of the executor's own on top
(:func:`executor_rule`). An emit's events are one batch: with atomic batches
(``nats.atomic_batches``) stored all or none, else one by one. When another writer got in
first (a stop request, a child's result, a human reply), the state is caught up from the log
and the events re-appended if they still apply; otherwise :class:`StaleState` ends the turn and
the executor replays afresh.

A tool's result goes through :meth:`TraceSink.emit_behind` (write-behind): its append is in
flight while the engine builds and sends the next model request, which has no effect outside
the process. An assistant message whose calls are all ``read_only`` is held while they run
(:meth:`TraceSink.hold`) and goes with the first result in one batch (without atomic batches
it is in flight meanwhile instead). The next append, or a call with effects, waits for what is
in flight or held first (:meth:`TraceSink.settle`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from longhaul.agent.contract import StaleState
from longhaul.core.repository import (
    ConcurrencyError,
    PendingSave,
    Recorded,
    Repository,
    RetryPolicy,
)
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState
from longhaul.executor.background_writes import TurnBackgroundWrites
from longhaul.executor.metrics import ExecutorMetrics

log = logging.getLogger(__name__)

RETRY = RetryPolicy(attempts=16)
"""A turn's events race with every other writer of the trace (children finishing, replies,
stops): more attempts than a one-off write before the turn gives up as stale."""


def executor_rule(state: TraceState, event: ev.Event) -> None:
    """The executor's own rule on top of the fold's (which the repository checks)."""
    if (
        isinstance(event, ev.Waiting)
        and event.reason == "subtraces"
        and not (state.running_subtraces())
    ):
        # The last child finished while the turn decided to wait: nothing would wake it.
        raise InvalidTransition("no sub-trace is running any more", code="conflict")


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
        self._pending: PendingSave[TraceState] | None = None
        """Events applied to the state and not yet stored: held (not sent yet) or in flight."""

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        """Append ``events`` (with any held ones, as one batch) and wait for them."""
        held = await self._take_held()
        if held is None:
            await self._save(self.state, list(events))
            return
        self._pending = await self._staged(events, held)
        await self._publish()
        await self.settle()

    async def emit_behind(self, events: Sequence[ev.TraceEvent]) -> None:
        """Like :meth:`emit`, except that the events (with any held ones: one batch) are
        applied at once and their append left in flight: the engine builds its next model
        request meanwhile. The next :meth:`emit` or :meth:`settle` waits for it first, so
        the log's order is the engine's and nothing follows an event that did not land."""
        self._pending = await self._staged(events, await self._take_held())
        await self._publish()

    async def hold(self, events: Sequence[ev.TraceEvent]) -> None:
        """Apply ``events`` now and append them with the next emit, in its batch: one round
        trip for both. Only for events followed by work a crash would simply repeat (an
        assistant message whose calls are all ``read_only``, while they run). Without atomic
        batches the events go in flight at once, as before (:meth:`emit_behind`)."""
        if not self.repository.atomic:
            await self.emit_behind(events)
            return
        self._pending = await self._staged(events, await self._take_held())

    async def _staged(
        self, events: Sequence[ev.TraceEvent], held: PendingSave[TraceState] | None
    ) -> PendingSave[TraceState]:
        """``events`` checked and applied, after the held ones in their batch if any."""
        if held is None:
            return await self.repository.stage(
                self.state.trace_id,
                self.state,
                events,
                actor=self.actor,
                correlation_id=self.state.task_id,
                rule=executor_rule,
            )
        await held.add(events, executor_rule)
        return held

    async def _take_held(self) -> PendingSave[TraceState] | None:
        """Settle what is in flight; what is held (not sent yet), taken from the sink."""
        if self._pending is not None and self._pending.published:
            await self.settle()
        pending, self._pending = self._pending, None
        return pending

    async def _publish(self) -> None:
        pending = self._pending
        assert pending is not None
        if self.lease.lost.is_set():
            self._pending = None
            await self.repository.restore(self.state.trace_id, self.state)
            raise StaleState(f"lease on trace {self.state.trace_id} lost")
        await pending.publish()

    async def settle(self) -> None:
        """Append what is held and wait for what is in flight (if anything). When another
        writer got in first, the state is restored from the log, the events are appended
        again after the other writer's (if they still apply) and :class:`StaleState` ends the
        turn, so the executor replays afresh."""
        pending = self._pending
        if pending is None:
            return
        if not pending.published:
            await self._publish()
        self._pending = None
        try:
            await pending.settle(self._applied)
        except ConcurrencyError as exc:
            events = pending.events[len(exc.recorded) :]  # what landed before: one by one
            assert all(isinstance(e, ev.TraceEvent) for e in events)
            await self._save(self.state, events, conflicted=True)  # type: ignore[arg-type]
            raise StaleState(
                f"trace {self.state.trace_id} moved while {len(events)} event(s) were in "
                "flight; appended again after the other writer's events"
            ) from None

    async def _save(
        self,
        state: TraceState,
        events: list[ev.TraceEvent],
        *,
        conflicted: bool = False,
    ) -> None:
        """Append ``events`` as one batch, caught up and checked again after a lost race;
        without atomic batches one by one (each re-decided on its own, as before)."""
        if not self.repository.atomic:
            for event in events:
                await self._save_batch(state, [event], conflicted=conflicted)
            return
        await self._save_batch(state, events, conflicted=conflicted)

    async def _save_batch(
        self,
        state: TraceState,
        events: list[ev.TraceEvent],
        *,
        conflicted: bool,
    ) -> None:
        retried = conflicted
        if conflicted:
            log.info("trace %s moved under the turn", state.trace_id)

        def decide(current: TraceState) -> list[ev.Event]:
            if self.lease.lost.is_set():
                raise StaleState(f"lease on trace {current.trace_id} lost")
            return list(events)

        def on_conflict(_: TraceState) -> None:
            nonlocal retried
            if not retried:
                log.info("trace %s moved under the turn", state.trace_id)
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
                rule=executor_rule,
            )
        except ConcurrencyError as exc:
            raise StaleState(f"trace {state.trace_id}: too many concurrent writers") from exc
        except InvalidTransition as exc:
            if not retried:
                raise
            self.metrics.conflicts.labels(outcome="stale").inc()
            raise StaleState(f"{events[0].type} no longer applies: {exc}") from exc
        if retried:
            self.metrics.conflicts.labels(outcome="reappended").inc()

    def _applied(self, state: TraceState, recorded: Recorded, previous: int) -> None:
        self.appended += 1
        self.metrics.events.inc()
        event = recorded.event
        if isinstance(event, ev.MessageAppended) and event.role == "assistant":
            self.metrics.steps.inc()
        self.background_writes.after_append(state)
