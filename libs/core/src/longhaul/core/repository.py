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
a service that keeps coming back to the same aggregates reads only their new events. Catch-up
is where the log's items become state: each is applied, or — when it does not decode or the
fold refuses it — recorded on the state as a fault and skipped, so one bad event never holds
an aggregate's readers hostage (:func:`~longhaul.domain.state.fold.apply_or_skip`).

Reads that need no fold go through it too — the first event (:meth:`Repository.first`), the
last event's type, per-aggregate event counts and a raw range of events (:meth:`replay`,
:meth:`watch`) — and so does an imported log (:meth:`Repository.import_log`): the recorder is
private, and no service reads JetStream's event stream itself.

Repositories are built once per service, by its composition root
(:class:`~longhaul.core.service.ServiceContext`), which declares their cache and snapshots.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from longhaul.core.eventlog import EventLog, InFlight
from longhaul.core.lru import Lru
from longhaul.core.snapshots import SnapshotIO, Snapshots
from longhaul.core.store import ConcurrencyError, EventPage, Position, Recorded
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate, Unreadable
from longhaul.domain.state import Fold, ScheduleState, TaskState, TraceState
from longhaul.domain.state.faults import Fault
from longhaul.domain.state.fold import apply_or_skip

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
        snapshots: SnapshotIO | None = None,
        snapshotter: Snapshots | None = None,
        cache_size: int = 0,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self._store = store
        """The recorder: private, every read and write goes through a named method here."""
        self.snapshots = snapshots
        """Where a load starts from (none: a full replay)."""
        self.snapshotter = snapshotter
        """Takes a snapshot when one is due after a save (none without it)."""
        self.aggregate: Aggregate = aggregate
        self.fold = fold
        self.retry = retry
        self._cache: Lru[str, S] | None = Lru(cache_size) if cache_size > 0 else None

    def taking_snapshots(self, snapshotter: Snapshots) -> Repository[S]:
        """This repository, its saves also taking snapshots through ``snapshotter`` (which
        its owner flushes; an executor's turn has its own). No cache: the owner keeps its
        fold."""
        return Repository(
            self._store,
            self.aggregate,
            self.fold,
            snapshots=self.snapshots,
            snapshotter=snapshotter,
            retry=self.retry,
        )

    # ------------------------------------------------------------------ read

    async def load(self, aggregate_id: str) -> S:
        """The aggregate's fold: the cached one caught up with the log, else snapshot plus
        catch-up. A missing aggregate folds to a state whose ``exists`` is False (and is
        not cached)."""
        state = self._cache.get(aggregate_id) if self._cache is not None else None
        if state is None:
            if self.snapshots is not None:
                state = await self.snapshots.read(self.aggregate, aggregate_id, self.fold)
            if state is None:
                state = self.fold()
        await self.catch_up(aggregate_id, state)
        if self._cache is not None and state.exists:
            self._cache.put(aggregate_id, state)
        return state

    async def exists(self, aggregate_id: str) -> bool:
        """True if the aggregate has any event (no fold)."""
        return await self._store.exists(self.aggregate, aggregate_id)

    async def catch_up(self, aggregate_id: str, state: S) -> int:
        """Apply the events newer than ``state`` (faults recorded and skipped); returns how
        many items there were."""
        applied = 0
        while True:
            after = state.stream_seq
            page = await self._store.read_page(self.aggregate, aggregate_id, after=after)
            faults: list[tuple[int, Fault]] = []
            for index, item in enumerate(page.events):
                seq = page.seqs[index] if page.seqs else 0
                fault = apply_or_skip(state, item, seq)
                if fault is not None:
                    faults.append((index, fault))
            if faults:
                await self._locate(aggregate_id, after, page, faults)
            if page.events:
                state.stream_seq = page.last_seq
            applied += len(page.events)
            if not page.full:
                return applied

    async def _locate(
        self, aggregate_id: str, after: int, page: EventPage, faults: list[tuple[int, Fault]]
    ) -> None:
        """Give the faults of a page read without sequences their place in the stream (rare:
        reading the page again is cheaper than always carrying them), and log them."""
        if not page.seqs:
            with contextlib.suppress(Exception):  # diagnostics only: the fold is already right
                seqs = (
                    await self._store.read_page(
                        self.aggregate, aggregate_id, after=after, with_seqs=True
                    )
                ).seqs
                for index, fault in faults:
                    if index < len(seqs):
                        fault.stream_seq = seqs[index]
        for _, fault in faults:
            log.warning(
                "%s %s: skipped event %d: %s",
                self.aggregate,
                aggregate_id,
                fault.stream_seq,
                fault.error,
            )

    async def first(self, aggregate_id: str) -> Recorded | Unreadable | None:
        """The aggregate's first stored event — its creation — in one read (no fold):
        :class:`Unreadable` when it does not decode, None when the aggregate has no events.
        What ownership checks and idempotency keys read."""
        return await self._store.first(self.aggregate, aggregate_id)

    async def last_type(self, aggregate_id: str) -> str | None:
        """The type of the aggregate's last event (one read, no payload), or None when it has
        none: whether a trace has ended, without folding it."""
        return await self._store.last_type(self.aggregate, aggregate_id)

    async def counts(self, event_type: str) -> dict[str, int]:
        """How many ``event_type`` events each aggregate of this kind holds, by id, for the
        aggregates that hold one (one request, no payloads): the ids created
        (``counts("task_created")``), or which tasks have more plans than reviews."""
        return await self._store.counts(self.aggregate, event_type)

    def replay(self, aggregate_id: str, *, after: int = 0) -> AsyncGenerator[Recorded, None]:
        """The aggregate's stored events after stream sequence ``after``, as recorded (an
        item that does not decode is left out): a raw range for streams, exports and the
        readers that stop at the first event they need, without folding."""
        return self._store.replay(self.aggregate, aggregate_id, after=after)

    def watch(self, aggregate_id: str, *, after: int = 0) -> AsyncGenerator[Recorded, None]:
        """:meth:`replay`, then the new events live, until the caller stops reading."""
        return self._store.watch(self.aggregate, aggregate_id, after=after)

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
            [recorded] = await self._store.append(
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

    async def import_log(
        self, aggregate_id: str, events: Sequence[ev.Event], *, actor: str
    ) -> list[Recorded]:
        """Write a whole log that was checked elsewhere (an imported bundle's, re-identified
        by the gateway) from an empty position, in one append: :class:`ConcurrencyError` if
        the aggregate exists, so nothing is ever added to one. Not checked against the fold:
        the log is copied as it was recorded, faults included."""
        return await self._store.append(
            self.aggregate, aggregate_id, events, expected=Position(), actor=actor
        )

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
                moved = await self.catch_up(aggregate_id, state)
                log.debug(
                    "%s %s moved by %d event(s); re-deciding", self.aggregate, aggregate_id, moved
                )
            try:
                for event in decide(state):
                    state.check(event)
                    [recorded] = await self._store.append(
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
                    if self.snapshotter is not None:
                        self.snapshotter.after_save(self.aggregate, aggregate_id, state, previous)
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
        in_flight = await self._store.begin_append(
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
        if repository.snapshotter is not None:
            repository.snapshotter.after_save(
                repository.aggregate, self.aggregate_id, state, self._previous
            )
        if on_applied is not None:
            on_applied(state, recorded, self._previous)
        return recorded


def traces(
    store: EventLog, *, snapshots: SnapshotIO | None = None, cache_size: int = 0
) -> Repository[TraceState]:
    """The repository of trace aggregates."""
    return Repository(store, "trace", TraceState, snapshots=snapshots, cache_size=cache_size)


def tasks(
    store: EventLog, *, snapshots: SnapshotIO | None = None, cache_size: int = 0
) -> Repository[TaskState]:
    """The repository of task aggregates."""
    return Repository(store, "task", TaskState, snapshots=snapshots, cache_size=cache_size)


def schedules(store: EventLog) -> Repository[ScheduleState]:
    """The repository of schedule aggregates (their logs hold the failed ticks)."""
    return Repository(store, "schedule", ScheduleState)
