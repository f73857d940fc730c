"""``MemoryStore``: the event store's surface in memory, for unit tests of decision logic.

Same rules as :class:`~longhaul.core.store.EventStore`: events are stamped (``aggregate_id``,
``n``, actor, causation and correlation), encoded and decoded as on the wire, appended only at
the aggregate's expected position (else :class:`ConcurrencyError`), replayed and watched by
stream sequence (:class:`MemorySnapshots` keeps snapshots beside it). Conflicts are simulated
with :meth:`interleave`: another writer's events land just before the next append to that
aggregate, as they would when a gateway request races an executor turn. Services' wiring,
chaos and clusters keep testing against a real nats-server; this is for what a service
*decides*.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from typing import TypeVar

from longhaul.core.snapshots import PackedSnapshot
from longhaul.core.store import REPLAY_PAGE, ConcurrencyError, EventPage, Position, Recorded, stamp
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate, Unreadable
from longhaul.domain.state import Fold
from longhaul.domain.state.fold import decode_snapshot

State = TypeVar("State", bound=Fold)


class Settled:
    """An in-memory append's outcome, shaped like an append in flight."""

    def __init__(
        self,
        events: list[ev.Event],
        *,
        recorded: list[Recorded] | None = None,
        error: ConcurrencyError | None = None,
    ) -> None:
        self.events = events
        self._recorded = recorded
        self._error = error

    async def settle(self) -> list[Recorded]:
        if self._recorded is None:
            assert self._error is not None
            raise self._error
        return self._recorded


class MemoryStore:
    def __init__(self, *, atomic: bool = False) -> None:
        self._seq = 0
        self._logs: dict[tuple[str, str], list[Recorded]] = {}
        self._payloads: dict[int, bytes] = {}
        self._pending: dict[tuple[str, str], list[ev.Event]] = {}
        self._changed = asyncio.Condition()
        self.atomic = atomic
        """Several events appended at once are stored all or none (JetStream's atomic batch,
        ``nats.atomic_batches``), else one by one, as the event store does by default."""
        self.appends = 0
        """Events stored (a retry that found its events stored adds none)."""
        self.round_trips = 0
        """Appends that stored something: one per batch, as the server would answer them."""
        self.conflicts = 0
        """Appends refused for a stale expected position."""

    # ------------------------------------------------------------------ append

    def interleave(self, aggregate: Aggregate, aggregate_id: str, *events: ev.Event) -> None:
        """Have another writer append ``events`` right before this store's next append to the
        aggregate (which then conflicts, as a real race would)."""
        self._pending.setdefault((aggregate, aggregate_id), []).extend(events)

    def erase(self, aggregate: Aggregate, aggregate_id: str) -> None:
        """Drop the aggregate's events, as erasure purges them from the stream."""
        self._logs.pop((aggregate, aggregate_id), None)

    async def append(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        events: Sequence[ev.Event],
        *,
        expected: Position,
        actor: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> list[Recorded]:
        key = (aggregate, aggregate_id)
        others = self._pending.pop(key, [])
        if others:
            await self.append(
                aggregate, aggregate_id, others, expected=self._end(key), actor="other-writer"
            )
        stamped = [
            stamp(
                event,
                aggregate,
                aggregate_id,
                expected.n + i,
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
            for i, event in enumerate(events, start=1)
        ]
        if self.atomic:
            return await self._publish_batch(key, stamped, expected.seq)
        recorded: list[Recorded] = []
        position = expected
        for event in stamped:
            try:
                [one] = await self._publish_batch(key, [event], position.seq)
            except ConcurrencyError as exc:
                exc.recorded = list(recorded)
                raise
            recorded.append(one)
            position = Position(one.seq, one.event.n)
        return recorded

    async def begin_append(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        events: Sequence[ev.Event],
        *,
        expected: Position,
        actor: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> Settled:
        """In memory there is nothing in flight: the append happens now, and its outcome
        (the records or the conflict) is what :meth:`Settled.settle` returns or raises."""
        try:
            recorded = await self.append(
                aggregate,
                aggregate_id,
                events,
                expected=expected,
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
        except ConcurrencyError as exc:
            return Settled(list(events), error=exc)
        return Settled([r.event for r in recorded], recorded=recorded)

    async def _publish_batch(
        self, key: tuple[str, str], events: list[ev.Event], expected_seq: int
    ) -> list[Recorded]:
        """Store ``events`` at the end of the aggregate's log, all or none: a retry of a
        stored batch (every event the same, by ``n`` and payload) answers what is stored."""
        log = self._logs.setdefault(key, [])
        payloads = [ev.encode(event) for event in events]
        stored = [log[e.n - 1] for e in events if e.n <= len(log)]
        if stored:  # the same Nats-Msg-Ids: a retry, or another writer's events
            if len(stored) == len(events) and all(
                self._payloads[r.seq] == p for r, p in zip(stored, payloads, strict=True)
            ):
                return [Recorded(self._stored(r.seq), r.seq) for r in stored]
            self.conflicts += 1
            raise ConcurrencyError(f"{key[0]} {key[1]} event {events[0].n} was written by another")
        if self._end(key).seq != expected_seq:
            self.conflicts += 1
            raise ConcurrencyError(f"{key[0]} {key[1]} moved past sequence {expected_seq}")
        for payload in payloads:
            self._seq += 1
            self._payloads[self._seq] = payload
            log.append(Recorded(ev.decode(payload), self._seq))
        self.appends += len(payloads)
        self.round_trips += 1
        async with self._changed:
            self._changed.notify_all()
        return [Recorded(self._stored(r.seq), r.seq) for r in log[-len(payloads) :]]

    def _stored(self, seq: int) -> ev.Event:
        return ev.decode(self._payloads[seq])

    def _end(self, key: tuple[str, str]) -> Position:
        log = self._logs.get(key)
        return Position(log[-1].seq, log[-1].event.n) if log else Position()

    # ------------------------------------------------------------------ read

    async def replay(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncGenerator[Recorded, None]:
        for recorded in list(self._logs.get((aggregate, aggregate_id), [])):
            if recorded.seq > after:
                yield Recorded(self._stored(recorded.seq), recorded.seq)

    async def watch(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncGenerator[Recorded, None]:
        """Events after ``after``, then new ones as they are appended, until cancelled."""
        key = (aggregate, aggregate_id)
        seen = after
        while True:
            async with self._changed:
                while self._end(key).seq <= seen:
                    await self._changed.wait()
            async for recorded in self.replay(aggregate, aggregate_id, after=seen):
                seen = recorded.seq
                yield recorded

    async def exists(self, aggregate: Aggregate, aggregate_id: str) -> bool:
        return bool(self._logs.get((aggregate, aggregate_id)))

    async def last_position(self, aggregate: Aggregate, aggregate_id: str) -> Position:
        return self._end((aggregate, aggregate_id))

    async def first(self, aggregate: Aggregate, aggregate_id: str) -> Recorded | Unreadable | None:
        log = self._logs.get((aggregate, aggregate_id))
        return Recorded(self._stored(log[0].seq), log[0].seq) if log else None

    async def last_type(self, aggregate: Aggregate, aggregate_id: str) -> str | None:
        log = self._logs.get((aggregate, aggregate_id))
        return log[-1].event.type if log else None

    async def counts(self, aggregate: Aggregate, event_type: str) -> dict[str, int]:
        counted = {
            aggregate_id: sum(1 for r in log if r.event.type == event_type)
            for (kind, aggregate_id), log in self._logs.items()
            if kind == aggregate
        }
        return {aggregate_id: n for aggregate_id, n in counted.items() if n}

    async def read_page(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int, with_seqs: bool = False
    ) -> EventPage:
        page = EventPage(last_seq=after)
        for recorded in self._logs.get((aggregate, aggregate_id), []):
            if recorded.seq <= after:
                continue
            if len(page.events) == REPLAY_PAGE:
                break
            page.events.append(self._stored(recorded.seq))
            page.seqs.append(recorded.seq)
            page.last_seq = recorded.seq
        if not with_seqs:
            page.seqs.clear()
        return page


class MemorySnapshots:
    """Snapshots in memory, beside a :class:`MemoryStore`."""

    def __init__(self) -> None:
        self._stored: dict[tuple[str, str], PackedSnapshot] = {}

    async def read(
        self, aggregate: Aggregate, aggregate_id: str, fold: type[State]
    ) -> State | None:
        packed = self._stored.get((aggregate, aggregate_id))
        if packed is None:
            return None
        return decode_snapshot(fold, packed.data, packed.schema)

    async def write(self, aggregate: Aggregate, aggregate_id: str, packed: PackedSnapshot) -> None:
        self._stored[(aggregate, aggregate_id)] = packed
