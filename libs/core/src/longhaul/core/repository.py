"""The repository: the one way longhaul reads a fold and writes an event.

Every writer (the gateway's commands, the executor's turns, children and poison handling, the
planner's steps, the verifier's verdicts) goes through :meth:`Repository.save`:

1. ``decide(state)`` says which events to append, from the fold as it stands;
2. each event is checked against the fold (:meth:`Fold.check`), so an event the fold would
   refuse never reaches the log, where it would poison the aggregate for every reader;
3. it is appended at the fold's position (``Nats-Expected-Last-Subject-Sequence``) and applied,
   and a snapshot is started in the background when one is due (:mod:`~longhaul.core.snapshots`);
4. or, for a writer with work to do meanwhile, :meth:`Repository.begin_save` publishes and
   applies at once and :class:`SaveInFlight` settles later (write-behind);
5. when another writer got there first (:class:`ConcurrencyError`), the fold is caught up
   after a short jittered pause and ``decide`` runs again on the new state — a bounded number
   of times (:class:`RetryPolicy`), after which the conflict is the caller's.

:meth:`Repository.load` is snapshot plus catch-up, optionally through a small LRU of folds so
a service that keeps coming back to the same aggregates reads only their new events.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from longhaul.core.eventlog import EventLog, InFlight
from longhaul.core.lru import Lru
from longhaul.core.snapshots import Snapshots
from longhaul.core.store import ConcurrencyError, Position, Recorded
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.state import Fold, TaskState, TraceState

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Fold)


@dataclass(frozen=True)
class RetryPolicy:
    """How often a lost race is re-decided, and how long to pause first.

    The pause is "full jitter" exponential backoff: uniform in ``[0, min(cap, base * 2**k)]``
    after the k-th conflict, so writers racing for one aggregate spread out instead of
    colliding again on the next round trip, and the worst case stays bounded (8 attempts:
    under 0.4 s of pauses).
    """

    attempts: int = 8
    base_s: float = 0.005
    cap_s: float = 0.1

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a retry policy needs at least one attempt")

    def pause(self, conflict: int) -> float:
        return random.uniform(0.0, min(self.cap_s, self.base_s * (2**conflict)))


DEFAULT_RETRY = RetryPolicy()
ONCE = RetryPolicy(attempts=1)
"""No retry: for callers whose decision is expensive and re-made a level up (the planner
re-runs its whole step on a fresh fold)."""

Decide = Callable[[S], Sequence[ev.Event]]
Applied = Callable[[S, Recorded, int], None]
"""Called after each applied event with the state, the record and the previous version."""


class Repository(Generic[S]):
    """Load and save one kind of aggregate (``"trace"`` with :class:`TraceState`, ``"task"``
    with :class:`TaskState`)."""

    def __init__(
        self,
        store: EventLog,
        aggregate: Aggregate,
        fold: type[S],
        *,
        cache_size: int = 0,
        retry: RetryPolicy = DEFAULT_RETRY,
        snapshots: Snapshots | None = None,
    ) -> None:
        self.store = store
        self.snapshots = snapshots
        """Takes a snapshot when one is due after a save (none without it)."""
        self.aggregate: Aggregate = aggregate
        self.fold = fold
        self.retry = retry
        self._cache: Lru[str, S] | None = Lru(cache_size) if cache_size > 0 else None

    # ------------------------------------------------------------------ read

    async def load(self, aggregate_id: str) -> S:
        """The aggregate's fold: the cached one caught up with the log, else snapshot plus
        catch-up. A missing aggregate folds to a state whose ``exists`` is False (and is
        not cached)."""
        state = self._cache.get(aggregate_id) if self._cache is not None else None
        if state is None:
            state = await self.store.read_snapshot(self.aggregate, aggregate_id, self.fold)
            if state is None:
                state = self.fold()
        await self.store.catch_up(self.aggregate, aggregate_id, state)
        if self._cache is not None and state.exists:
            self._cache.put(aggregate_id, state)
        return state

    async def catch_up(self, aggregate_id: str, state: S) -> int:
        """Apply the events newer than ``state``; returns how many there were."""
        return await self.store.catch_up(self.aggregate, aggregate_id, state)

    def forget(self, aggregate_id: str) -> None:
        """Drop a cached fold (an aggregate that will not be written again)."""
        if self._cache is not None:
            self._cache.pop(aggregate_id)

    # ------------------------------------------------------------------ write

    async def create(
        self,
        aggregate_id: str,
        event: ev.Event,
        *,
        actor: str,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> S | None:
        """Start the aggregate with ``event``; its fold, or None if it exists already (ids
        derived from the work, like a step trace's, make creating twice a no-op)."""
        state = self.fold()
        state.check(event)
        try:
            [recorded] = await self.store.append(
                self.aggregate,
                aggregate_id,
                [event],
                expected=Position(),
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
        except ConcurrencyError:
            return None
        state.apply(recorded.event, recorded.seq)
        return state

    async def save(
        self,
        aggregate_id: str,
        state: S,
        decide: Decide[S],
        *,
        actor: str,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        retry: RetryPolicy | None = None,
        on_conflict: Callable[[S], None] | None = None,
        on_applied: Applied[S] | None = None,
    ) -> list[Recorded]:
        """Append what ``decide(state)`` returns, each event checked against the fold and
        appended at its position, then applied to ``state``. Returns the records (empty
        when ``decide`` wants nothing).

        On a conflict ``state`` is caught up in place and ``decide`` runs again: it sees any
        events this call already wrote, so it must decide from the state, not replay a fixed
        list (a fixed list of more than one event belongs with :data:`ONCE`). ``decide`` and
        :meth:`Fold.check` raise to give up (:class:`InvalidTransition`, or the caller's own
        error); :class:`ConcurrencyError` once the retry policy is spent.
        """
        policy = retry or self.retry
        written: list[Recorded] = []
        for conflict in range(policy.attempts):
            if conflict:
                if on_conflict is not None:
                    on_conflict(state)
                await asyncio.sleep(policy.pause(conflict - 1))
                moved = await self.store.catch_up(self.aggregate, aggregate_id, state)
                log.debug(
                    "%s %s moved by %d event(s); re-deciding", self.aggregate, aggregate_id, moved
                )
            try:
                for event in decide(state):
                    state.check(event)
                    [recorded] = await self.store.append(
                        self.aggregate,
                        aggregate_id,
                        [event],
                        expected=Position(state.stream_seq, state.version),
                        actor=actor,
                        causation_id=causation_id,
                        correlation_id=correlation_id,
                    )
                    previous = state.version
                    state.apply(recorded.event, recorded.seq)
                    written.append(recorded)
                    if self.snapshots is not None:
                        self.snapshots.after_save(self.aggregate, aggregate_id, state, previous)
                    if on_applied is not None:
                        on_applied(state, recorded, previous)
                return written
            except ConcurrencyError:
                if conflict + 1 == policy.attempts:
                    raise
        raise AssertionError("unreachable: a retry policy has at least one attempt")

    async def begin_save(
        self,
        aggregate_id: str,
        state: S,
        event: ev.Event,
        *,
        actor: str,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> SaveInFlight[S]:
        """Write-behind: check ``event`` against the fold, publish it at the fold's position
        and apply it at once, without waiting for the server. The caller gets on with work
        that has no effect outside the process (building the next model request) and calls
        :meth:`SaveInFlight.settle` before anything else is appended or done."""
        state.check(event)
        in_flight = await self.store.begin_append(
            self.aggregate,
            aggregate_id,
            event,
            expected=Position(state.stream_seq, state.version),
            actor=actor,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        previous = state.version
        state.apply(in_flight.event)
        return SaveInFlight(self, aggregate_id, state, event, in_flight, previous)


class SaveInFlight(Generic[S]):
    """One event of :meth:`Repository.begin_save`: already applied to the fold, its append
    still in flight. The fold's ``stream_seq`` (the position the next append expects) is set
    by :meth:`settle`, so nothing else may be appended to the aggregate until then."""

    def __init__(
        self,
        repository: Repository[S],
        aggregate_id: str,
        state: S,
        event: ev.Event,
        in_flight: InFlight,
        previous: int,
    ) -> None:
        self.repository = repository
        self.aggregate_id = aggregate_id
        self.state = state
        self.event = event
        """The event as the caller gave it (unstamped), to append again after a conflict."""
        self._in_flight = in_flight
        self._previous = previous

    async def settle(self, on_applied: Applied[S] | None = None) -> Recorded:
        """Wait for the append. On success the fold takes its position and the after-save
        work (snapshot, ``on_applied``) runs as :meth:`Repository.save` would have.

        :class:`ConcurrencyError` when another writer got there first: the fold then has an
        event the log does not (at that place), so it must be dropped; the caller reloads
        and decides again (:meth:`Repository.load`, :meth:`Repository.save`)."""
        recorded = await self._in_flight.settle()
        state, repository = self.state, self.repository
        state.stream_seq = recorded.seq
        if repository.snapshots is not None:
            repository.snapshots.after_save(
                repository.aggregate, self.aggregate_id, state, self._previous
            )
        if on_applied is not None:
            on_applied(state, recorded, self._previous)
        return recorded


def traces(
    store: EventLog, *, cache_size: int = 0, snapshots: Snapshots | None = None
) -> Repository[TraceState]:
    """The repository of trace aggregates."""
    return Repository(store, "trace", TraceState, cache_size=cache_size, snapshots=snapshots)


def tasks(store: EventLog, *, cache_size: int = 0) -> Repository[TaskState]:
    """The repository of task aggregates."""
    return Repository(store, "task", TaskState, cache_size=cache_size)
