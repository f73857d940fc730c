"""The repository: the one way longhaul reads a fold and writes an event.

Every writer (the gateway's commands, the executor's turns, children and poison handling, the
planner's steps, the verifier's verdicts) goes through :meth:`Repository.save`:

1. ``decide(state)`` says which events to append, from the fold as it stands;
2. each event is checked against the fold (:meth:`Fold.check`), so an event the fold would
   refuse never reaches the log, where it would poison the aggregate for every reader;
3. it is appended at the fold's position (``Nats-Expected-Last-Subject-Sequence``) and applied,
   and a snapshot is started in the background when one is due (:mod:`~longhaul.core.snapshots`);
   several events are checked in order, each against the fold the previous one left, and
   appended as one atomic batch (:class:`PendingSave`): all of them or none;
4. or, for a writer with work to do meanwhile, :meth:`Repository.begin_save` publishes and
   applies at once and :class:`PendingSave` settles later (write-behind);
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
from typing import Generic, TypeVar, cast

import msgspec
from longhaul.core.eventlog import EventLog, InFlight
from longhaul.core.keylocks import KeyLocks
from longhaul.core.lru import Lru
from longhaul.core.read_floor import StaleRead, floor_for
from longhaul.core.snapshots import SnapshotIO, Snapshots
from longhaul.core.store import ConcurrencyError, EventPage, Position, Recorded, stamp
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate, Unreadable
from longhaul.domain.state import Fold, ScheduleState, TaskState, TraceState
from longhaul.domain.state.faults import Fault
from longhaul.domain.state.fold import apply_or_skip

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Fold)

STALE_READ_WAIT_S = 3.0
"""How long a load waits for a replica behind the event being handled before giving up."""
STALE_READ_PAUSE_S = 0.02


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
Rule = Callable[[S, ev.Event], None]
"""A writer's own rule on top of the fold's, checked before each event: raises to refuse."""


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
        self._loading = KeyLocks()
        """A cached fold is shared: loads of one id take turns, so two catch-ups never apply
        the same events to it twice."""

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

    @property
    def atomic(self) -> bool:
        """Whether several events saved at once are stored all or none (one atomic batch)."""
        return self._store.atomic

    # ------------------------------------------------------------------ read

    async def load(self, aggregate_id: str, *, origin: int = 0) -> S:
        """The aggregate's fold: the cached one caught up with the log, else snapshot plus
        catch-up. A missing aggregate folds to a state whose ``exists`` is False (and is
        not cached). ``origin``: the stream sequence of the aggregate's first event, when the
        caller has just read it; a cached fold from before it (the aggregate was erased and
        its id used again) is dropped."""
        if self._cache is None:
            return await self._load(aggregate_id, None)
        async with self._loading.hold(aggregate_id):
            cached = self._cache.get(aggregate_id)
            if cached is not None and cached.stream_seq < origin:
                self._cache.pop(aggregate_id)
                cached = None
            try:
                state = await self._load(aggregate_id, cached)
            except BaseException:
                # a catch-up cut short may have applied events it has not counted yet
                self._cache.pop(aggregate_id)
                raise
            if state.exists:
                self._cache.put(aggregate_id, state)
            return state

    async def _load(self, aggregate_id: str, state: S | None) -> S:
        if state is None:
            if self.snapshots is not None:
                state = await self.snapshots.read(self.aggregate, aggregate_id, self.fold)
            if state is None:
                state = self.fold()
        await self.catch_up(aggregate_id, state)
        floor = floor_for(self.aggregate, aggregate_id)
        if state.stream_seq < floor:
            await self._reach(aggregate_id, state, floor)
        return state

    async def _reach(self, aggregate_id: str, state: S, floor: int) -> None:
        """Read again until the fold includes the event at ``floor`` (a replica answered from
        behind it: :mod:`~longhaul.core.read_floor`); :class:`StaleRead` if it stays behind.
        A fold with no event at all is checked with the stream's leader first: none there
        means the aggregate was erased since its event was delivered."""
        if not state.exists and not await self.exists(aggregate_id):
            return
        deadline = asyncio.get_running_loop().time() + STALE_READ_WAIT_S
        pause = STALE_READ_PAUSE_S
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)
            await self.catch_up(aggregate_id, state)
            if state.stream_seq >= floor:
                return
        raise StaleRead(
            f"{self.aggregate} {aggregate_id}: read up to {state.stream_seq}, "
            f"woken by {floor}, after {STALE_READ_WAIT_S:.0f} s"
        )

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

    def kept(self, aggregate_id: str) -> S | None:
        """The cached fold of the aggregate, if one is kept (no read: as last caught up)."""
        return self._cache.peek(aggregate_id) if self._cache is not None else None

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
        rule: Rule[S] | None = None,
    ) -> list[Recorded]:
        """Append what ``decide(state)`` returns, checked against the fold (and ``rule``, the
        caller's own, before each event) and applied to ``state``. Returns the records (empty
        when ``decide`` wants nothing).

        Several events are checked in order against the fold as each leaves it, and stored as
        one atomic batch: all or none (a recorder without atomic batches appends them one by
        one, as before). On a conflict ``state`` is caught up in place and ``decide`` runs
        again: without atomic batches it sees any events this call already wrote, so it must
        decide from the state, not replay a fixed list. ``decide``, ``rule`` and
        :meth:`Fold.check` raise to give up (:class:`InvalidTransition`, or the caller's own
        error), leaving ``state`` as the log has it; :class:`ConcurrencyError` once the retry
        policy is spent.
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
                events = list(decide(state))
                if len(events) > 1 and self._store.atomic:
                    pending = await self.begin_save(
                        aggregate_id,
                        state,
                        events,
                        actor=actor,
                        causation_id=causation_id,
                        correlation_id=correlation_id,
                        rule=rule,
                    )
                    written.extend(await pending.settle(on_applied))
                    return written
                for event in events:
                    if rule is not None:
                        rule(state, event)
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

    async def stage(
        self,
        aggregate_id: str,
        state: S,
        events: Sequence[ev.Event],
        *,
        actor: str,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        rule: Rule[S] | None = None,
    ) -> PendingSave[S]:
        """Check ``events`` in order (``rule``, then the fold's) and apply each to ``state``,
        stamped as the log will have them, without appending yet: :meth:`PendingSave.publish`
        sends them as one batch, :meth:`PendingSave.settle` waits for it. A refused event
        leaves ``state`` as the log has it (reloaded in place when earlier ones were
        applied)."""
        pending = PendingSave(
            self,
            aggregate_id,
            state,
            actor,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        await pending.add(events, rule)
        return pending

    async def begin_save(
        self,
        aggregate_id: str,
        state: S,
        events: Sequence[ev.Event],
        *,
        actor: str,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        rule: Rule[S] | None = None,
    ) -> PendingSave[S]:
        """Write-behind: check ``events`` against the fold, publish them at the fold's
        position (one atomic batch) and apply them at once, without waiting for the server.
        The caller gets on with work that has no effect outside the process (building the
        next model request) and calls :meth:`PendingSave.settle` before anything else is
        appended or done."""
        pending = await self.stage(
            aggregate_id,
            state,
            events,
            actor=actor,
            causation_id=causation_id,
            correlation_id=correlation_id,
            rule=rule,
        )
        await pending.publish()
        return pending

    async def restore(self, aggregate_id: str, state: S) -> None:
        """Put ``state`` back to what the log holds, in place (its holders keep it): after
        events were applied to it that were not stored. A full load, past any cache."""
        fresh: S | None = None
        if self.snapshots is not None:
            fresh = await self.snapshots.read(self.aggregate, aggregate_id, self.fold)
        if fresh is None:
            fresh = self.fold()
        await self.catch_up(aggregate_id, fresh)
        for field in msgspec.structs.fields(cast(type[msgspec.Struct], type(fresh))):
            setattr(state, field.name, getattr(fresh, field.name))


class PendingSave(Generic[S]):
    """Events of one batch (:meth:`Repository.stage`): checked and already applied to the
    fold, appended by :meth:`publish` at the position the fold had before them, settled by
    :meth:`settle`. The fold's ``stream_seq`` (the position the next append expects) is set
    by :meth:`settle`, so nothing else may be appended to the aggregate until then."""

    def __init__(
        self,
        repository: Repository[S],
        aggregate_id: str,
        state: S,
        actor: str,
        *,
        causation_id: str | None,
        correlation_id: str | None,
    ) -> None:
        self.repository = repository
        self.aggregate_id = aggregate_id
        self.state = state
        self.actor = actor
        self.causation_id = causation_id
        self.correlation_id = correlation_id
        self.expected = Position(state.stream_seq, state.version)
        self.events: list[ev.Event] = []
        """The events as the caller gave them (unstamped), to append again after a conflict."""
        self._stamped: list[ev.Event] = []
        self._in_flight: InFlight | None = None

    @property
    def published(self) -> bool:
        return self._in_flight is not None

    async def add(self, events: Sequence[ev.Event], rule: Rule[S] | None = None) -> None:
        """Check and apply more events, to go in the same batch (before :meth:`publish`)."""
        assert self._in_flight is None, "a published batch takes no more events"
        state, repository = self.state, self.repository
        try:
            for event in events:
                if rule is not None:
                    rule(state, event)
                state.check(event)
                stamped = stamp(
                    event,
                    repository.aggregate,
                    self.aggregate_id,
                    state.version + 1,
                    actor=self.actor,
                    causation_id=self.causation_id,
                    correlation_id=self.correlation_id,
                )
                state.apply(stamped)
                self.events.append(event)
                self._stamped.append(stamped)
        except Exception:
            if self._stamped:  # the fold holds events that will not be stored
                await repository.restore(self.aggregate_id, state)
                self.events.clear()
                self._stamped.clear()
            raise

    async def publish(self) -> None:
        """Send the batch (at most :data:`~longhaul.core.store.MAX_BATCH` events)."""
        repository = self.repository
        self._in_flight = await repository._store.begin_append(
            repository.aggregate,
            self.aggregate_id,
            self._stamped,
            expected=self.expected,
            actor=self.actor,
            causation_id=self.causation_id,
            correlation_id=self.correlation_id,
        )

    async def settle(self, on_applied: Applied[S] | None = None) -> list[Recorded]:
        """Wait for the append. On success the fold takes its position and the after-save
        work (snapshot, ``on_applied``) runs as :meth:`Repository.save` would have.

        :class:`ConcurrencyError` when another writer got there first: the fold, which had
        events the log does not (at that place), is restored from the log, and the caller
        decides again (the error's ``recorded``: what was stored before the refusal, only
        ever without atomic batches)."""
        assert self._in_flight is not None, "settle comes after publish"
        try:
            recorded = await self._in_flight.settle()
        except ConcurrencyError:
            await self.repository.restore(self.aggregate_id, self.state)
            raise
        state, repository = self.state, self.repository
        state.stream_seq = recorded[-1].seq
        first = self.expected.n
        if repository.snapshotter is not None:
            repository.snapshotter.after_save(repository.aggregate, self.aggregate_id, state, first)
        if on_applied is not None:
            for i, one in enumerate(recorded):
                on_applied(state, one, first + i)
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
