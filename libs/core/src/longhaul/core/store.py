"""The event store: append with optimistic concurrency, replay, snapshots, live watch.

Append rule (DESIGN.md §3): each event is published with
``Nats-Expected-Last-Subject-Sequence`` (the stream sequence of the aggregate's last event) on
the aggregate's wildcard subject, and ``Nats-Msg-Id: <id>:<n>`` so a retried publish is
de-duplicated by the server. A duplicate ack whose stored payload differs from ours means two
writers produced event ``n``: that is a conflict, not a success. The event's
``trace_context`` travels as headers too (``traceparent``…, see ``longhaul.core.telemetry``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import zlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import NamedTuple, TypeVar

import msgspec
import nats.errors
from longhaul.core.connection import Connection
from longhaul.core.direct import DirectGetError, direct_page
from longhaul.core.telemetry import carrier_headers, current_carrier
from longhaul.core.transient import is_transient, retry_transient
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.state import Fold, TaskState, TraceState
from longhaul.domain.state.faults import Fault, Unreadable
from longhaul.domain.state.fold import apply_or_skip
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import APIError, NotFoundError, ObjectNotFoundError

log = logging.getLogger(__name__)
WRONG_LAST_SEQUENCE = 10071
SNAPSHOT_INLINE_LIMIT = 512 * 1024
REPLAY_PAGE = 2048
OFF_LOOP_BYTES = 256 * 1024
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0

State = TypeVar("State", bound=Fold)


class ConcurrencyError(Exception):
    """Another writer appended to the aggregate first: re-replay and decide again."""


class Position(msgspec.Struct, frozen=True):
    """Where an aggregate's log ends: stream sequence and per-aggregate event number."""

    seq: int = 0
    n: int = 0


class Recorded(msgspec.Struct, frozen=True):
    """An event as stored, with its stream sequence."""

    event: ev.Event
    seq: int


def stamp(
    event: ev.Event,
    aggregate: Aggregate,
    aggregate_id: str,
    n: int,
    *,
    actor: str | None,
    causation_id: str | None,
    correlation_id: str | None,
) -> ev.Event:
    """``event`` as the ``n``-th of the aggregate, with the writer's actor, causation and
    current span (the event's own win): what every store writes."""
    if event.aggregate != aggregate:
        raise ValueError(f"{event.type} is not a {aggregate} event")
    return msgspec.structs.replace(
        event,
        aggregate_id=aggregate_id,
        n=n,
        actor=event.actor or actor or "",
        causation_id=event.causation_id or causation_id,
        correlation_id=event.correlation_id or correlation_id,
        trace_context=event.trace_context or current_carrier(),
    )


class _Page(msgspec.Struct):
    last_seq: int
    events: list[ev.Event | Unreadable] = msgspec.field(default_factory=list)
    seqs: list[int] = msgspec.field(default_factory=list)


class PackedSnapshot(NamedTuple):
    """A fold encoded at one moment, with the position it had then."""

    data: bytes
    seq: int
    n: int


def pack_snapshot(state: Fold) -> PackedSnapshot:
    """Encode ``state`` now: a snapshot must be taken where the fold matches the log (an event
    whose append is still in flight has moved ``version`` but not ``stream_seq``)."""
    return PackedSnapshot(msgspec.msgpack.encode(state), state.stream_seq, state.version)


class _Snapshot(msgspec.Struct):
    """KV value of a snapshot: zlib-compressed msgpack of the state, inline or in the object
    store."""

    seq: int
    n: int
    state: bytes = b""
    object_name: str | None = None


def _retrieve(future: asyncio.Future[api.PubAck]) -> None:
    """Mark an acknowledgement's error as seen: a turn cancelled before settling must not
    log "exception never retrieved" (the replay afterwards finds out what landed)."""
    if not future.cancelled():
        future.exception()


class PendingAppend:
    """An event published by :meth:`EventStore.begin_append`, its acknowledgement not yet
    awaited. :meth:`settle` turns it into a :class:`Recorded` or the append's error."""

    def __init__(
        self,
        store: EventStore,
        event: ev.Event,
        subject: str,
        payload: bytes,
        headers: dict[str, str],
        expected_seq: int,
        ack: asyncio.Future[api.PubAck],
    ) -> None:
        self.store = store
        self.event = event
        """The event as stamped (its ``n``) and published."""
        self._subject = subject
        self._payload = payload
        self._headers = headers
        self._expected_seq = expected_seq
        self._ack = ack
        ack.add_done_callback(_retrieve)
        self._settled: Recorded | None = None

    async def settle(self) -> Recorded:
        """Wait for the server's answer (retrying a lost one with the same ``Nats-Msg-Id``).

        Raises :class:`ConcurrencyError` if the aggregate moved past the expected position
        first, or if another writer stored this event number; the transport's error when the
        server never answered. Settling twice returns the same record."""
        if self._settled is None:
            self._settled = Recorded(self.event, await self._acknowledged_seq())
        return self._settled

    async def _acknowledged_seq(self) -> int:
        store, event = self.store, self.event
        aggregate, aggregate_id = event.aggregate, event.aggregate_id
        ack: api.PubAck | None = None
        deadline = time.monotonic() + store.conn.unavailable_retry_s
        delay = BACKOFF_FIRST_S
        attempt = 0
        while True:
            attempt += 1
            try:
                if attempt == 1:
                    # Usually answered while the caller worked: no timer needed then.
                    ack = (
                        self._ack.result()
                        if self._ack.done()
                        else await asyncio.wait_for(self._ack, store.conn.request_timeout_s)
                    )
                else:
                    ack = await store.conn.js.publish(
                        self._subject,
                        self._payload,
                        stream=store.names.stream,
                        headers=self._headers,
                    )
                break
            except APIError as exc:
                if exc.err_code == WRONG_LAST_SEQUENCE:
                    # Either another writer got there first, or our own earlier attempt landed
                    # and its ack was lost: the event right after ``expected_seq`` tells which.
                    seq = await retry_transient(
                        lambda: store._own_earlier_publish(
                            aggregate, aggregate_id, self._expected_seq, self._payload
                        ),
                        what=f"append to {aggregate} {aggregate_id}",
                        within_s=max(deadline - time.monotonic(), BACKOFF_MAX_S),
                    )
                    if seq is None:
                        raise ConcurrencyError(
                            f"{aggregate} {aggregate_id} moved past sequence {self._expected_seq}"
                        ) from exc
                    return seq
                if not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
            except Exception as exc:
                # A leader election, a node going: the publish may have landed, and the same
                # Msg-Id makes the retry harmless (a duplicate's ack names the first one).
                if not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(BACKOFF_MAX_S, delay * 2)
        assert ack is not None
        if ack.duplicate:
            stored = await store.conn.js.get_msg(store.names.stream, ack.seq)
            if stored.data != self._payload:
                raise ConcurrencyError(
                    f"{aggregate} {aggregate_id} event {event.n} was written by another writer"
                )
        return int(ack.seq)


class EventStore:
    def __init__(self, conn: Connection, *, snapshot_every: int = 200) -> None:
        self.conn = conn
        self.names = conn.names
        self.snapshot_every = snapshot_every

    # ------------------------------------------------------------------ append

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
        """Append ``events`` in order after ``expected``; returns them stamped and sequenced.

        Raises :class:`ConcurrencyError` if the aggregate moved past ``expected``.
        """
        recorded: list[Recorded] = []
        position = expected
        for event in events:
            pending = await self.begin_append(
                aggregate,
                aggregate_id,
                event,
                expected=position,
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
            recorded.append(await pending.settle())
            position = Position(recorded[-1].seq, pending.event.n)
        return recorded

    async def begin_append(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        event: ev.Event,
        *,
        expected: Position,
        actor: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
    ) -> PendingAppend:
        """Publish ``event`` after ``expected`` without waiting for the server's answer: the
        caller does other work (builds the next model request) while the append is in flight,
        and :meth:`PendingAppend.settle` later says whether it landed. Nothing else may be
        appended to the aggregate by this writer until then (it needs this one's sequence)."""
        stamped = stamp(
            event,
            aggregate,
            aggregate_id,
            expected.n + 1,
            actor=actor,
            causation_id=causation_id,
            correlation_id=correlation_id,
        )
        payload = ev.encode(stamped)
        headers = {
            "Nats-Msg-Id": f"{aggregate_id}:{stamped.n}",
            "Nats-Expected-Last-Subject-Sequence": str(expected.seq),
            "Nats-Expected-Last-Subject-Sequence-Subject": self.names.aggregate_filter(
                aggregate, aggregate_id
            ),
            **carrier_headers(stamped.trace_context),
        }
        subject = self.names.subject(aggregate, aggregate_id, stamped.type)
        ack = await self.conn.js.publish_async(
            subject, payload, stream=self.names.stream, headers=headers
        )
        # nats-py queues a publish for its flusher task, which would not run before the caller
        # next waits: one turn of the loop sends it now, so it travels while the caller works.
        await asyncio.sleep(0)
        return PendingAppend(self, stamped, subject, payload, headers, expected.seq, ack)

    async def _own_earlier_publish(
        self, aggregate: Aggregate, aggregate_id: str, expected_seq: int, payload: bytes
    ) -> int | None:
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        try:
            stored = await self.conn.js.get_msg(
                self.names.stream, seq=expected_seq + 1, subject=subject, next=True
            )
        except NotFoundError:
            return None
        return int(stored.seq or 0) if stored.data == payload else None

    # ------------------------------------------------------------------ replay

    async def replay(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncIterator[Recorded]:
        """Every stored event of the aggregate with stream sequence > ``after``, in order.

        Reads pages with JetStream's batched direct get (``next_by_subj`` + ``batch``): one
        request per page instead of a consumer, which is what makes a full replay fast.
        """
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        while True:
            page = await self._direct_page(subject, after, with_headers=True)
            for event, seq in zip(page.events, page.seqs, strict=True):
                if isinstance(event, Unreadable):
                    log.warning("skipping unreadable event %d of %s: %s", seq, subject, event.error)
                    continue
                yield Recorded(event, seq)
            if len(page.events) < REPLAY_PAGE:
                return
            after = page.last_seq

    async def _direct_page(self, subject: str, after: int, *, with_headers: bool) -> _Page:
        """One batch of up to ``REPLAY_PAGE`` events after ``after``.

        Without headers the server sends bare payloads (no per-message sequence, no stored
        ``Nats-*`` headers to parse) and the end-of-batch marker says where the page ended:
        a fold only needs that last sequence, and skipping the headers halves its cost.
        """
        return await retry_transient(
            lambda: self._direct_page_once(subject, after, with_headers=with_headers),
            what=f"read {subject}",
            within_s=self.conn.unavailable_retry_s,
        )

    async def _direct_page_once(self, subject: str, after: int, *, with_headers: bool) -> _Page:
        page = _Page(last_seq=after)

        def on_message(msg: Msg) -> None:
            seq = int((msg.headers or {}).get("Nats-Sequence", 0) or 0) if with_headers else 0
            try:
                page.events.append(ev.decode(msg.data))
            except ev.EventDecodeError as exc:  # a fault for the fold, not a failed read
                page.events.append(Unreadable(error=str(exc)[:500], stream_seq=seq))
            if with_headers:
                page.seqs.append(seq)

        page.last_seq = await direct_page(
            self.conn.nc,
            self.names.stream,
            subject,
            after=after,
            batch=REPLAY_PAGE,
            on_message=on_message,
            with_headers=with_headers,
        )
        return page

    async def watch(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncIterator[Recorded]:
        """Events of the aggregate after ``after``, then new ones live, until cancelled."""
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=after + 1,
        )
        sub = await self.conn.js.subscribe(
            subject,
            stream=self.names.stream,
            ordered_consumer=True,
            config=config,
            pending_msgs_limit=-1,
            pending_bytes_limit=-1,
        )
        try:
            async for msg in sub.messages:
                seq = msg.metadata.sequence.stream
                try:
                    event = ev.decode(msg.data)
                except ev.EventDecodeError as exc:
                    log.warning("skipping unreadable event %d of %s: %s", seq, subject, exc)
                    continue
                yield Recorded(event, seq)
        finally:
            await sub.unsubscribe()

    async def exists(self, aggregate: Aggregate, aggregate_id: str) -> bool:
        """True if the aggregate has any event (one direct get, no replay)."""
        try:
            await self.conn.js.get_msg(
                self.names.stream,
                seq=1,
                subject=self.names.aggregate_filter(aggregate, aggregate_id),
                next=True,
            )
        except NotFoundError:
            return False
        return True

    async def last_position(self, aggregate: Aggregate, aggregate_id: str) -> Position:
        """The aggregate's current end, from its last stored event."""
        position = Position()
        async for recorded in self.replay(aggregate, aggregate_id):
            position = Position(recorded.seq, recorded.event.n)
        return position

    # ------------------------------------------------------------------ load + snapshots

    async def load_trace(self, trace_id: str) -> TraceState:
        return await self.load("trace", trace_id, TraceState)

    async def load_task(self, task_id: str) -> TaskState:
        return await self.load("task", task_id, TaskState)

    async def load(self, aggregate: Aggregate, aggregate_id: str, state_type: type[State]) -> State:
        """Snapshot (if any) plus the tail of the log. A missing aggregate folds to an empty
        state whose ``exists`` is False."""
        state = await self.read_snapshot(aggregate, aggregate_id, state_type)
        if state is None:
            state = state_type()
        await self.catch_up(aggregate, aggregate_id, state)
        return state

    async def catch_up(self, aggregate: Aggregate, aggregate_id: str, state: State) -> int:
        """Apply events newer than ``state.stream_seq``; returns how many were applied."""
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        applied = 0
        while True:
            after = state.stream_seq
            page = await self._direct_page(subject, after, with_headers=False)
            faults = [
                (index, fault)
                for index, event in enumerate(page.events)
                if (fault := apply_or_skip(state, event)) is not None
            ]
            if faults:
                await self._locate(subject, after, faults)
                for _, fault in faults:
                    log.warning(
                        "%s %s: skipped event %d: %s",
                        aggregate,
                        aggregate_id,
                        fault.stream_seq,
                        fault.error,
                    )
            if page.events:
                state.stream_seq = page.last_seq
            applied += len(page.events)
            if len(page.events) < REPLAY_PAGE:
                return applied

    async def _locate(self, subject: str, after: int, faults: list[tuple[int, Fault]]) -> None:
        """Fill in the stream sequences of faults found in a header-less page (rare: reading
        the page again with headers is cheaper than always carrying them)."""
        with contextlib.suppress(Exception):  # diagnostics only: the fold is already right
            seqs = (await self._direct_page(subject, after, with_headers=True)).seqs
            for index, fault in faults:
                if index < len(seqs):
                    fault.stream_seq = seqs[index]

    def _snapshot_key(self, aggregate: Aggregate, aggregate_id: str) -> str:
        return f"{aggregate}.{aggregate_id}"

    async def read_snapshot(
        self, aggregate: Aggregate, aggregate_id: str, state_type: type[State]
    ) -> State | None:
        kv = await self.conn.kv(self.names.snapshots)
        try:
            entry = await kv.get(self._snapshot_key(aggregate, aggregate_id))
        except (NotFoundError, nats.js.errors.KeyNotFoundError):
            return None
        if not entry.value:
            return None
        try:
            snapshot = msgspec.msgpack.decode(entry.value, type=_Snapshot)
            blob = snapshot.state
            if snapshot.object_name:
                blob = await self.conn.read_artifact(snapshot.object_name)
            packed = await _off_loop(zlib.decompress, blob)
            state = msgspec.msgpack.decode(packed, type=state_type)
        except (
            msgspec.DecodeError,
            msgspec.ValidationError,
            ObjectNotFoundError,
            DirectGetError,
            zlib.error,
        ) as exc:
            # A snapshot is only an optimisation: fall back to a full replay.
            log.warning("ignoring unreadable snapshot of %s %s: %s", aggregate, aggregate_id, exc)
            return None
        return state

    async def write_snapshot(self, aggregate: Aggregate, aggregate_id: str, state: Fold) -> None:
        """Store the folded state as compressed msgpack; what does not fit a KV value goes to
        the object store with a KV pointer."""
        await self.write_packed_snapshot(aggregate, aggregate_id, pack_snapshot(state))

    async def write_packed_snapshot(
        self, aggregate: Aggregate, aggregate_id: str, packed: PackedSnapshot
    ) -> None:
        """Store a state encoded earlier (:func:`pack_snapshot`), at the position it had then."""
        snapshot = _Snapshot(seq=packed.seq, n=packed.n)
        blob = await _off_loop(zlib.compress, packed.data, 1)
        if len(blob) <= SNAPSHOT_INLINE_LIMIT:
            snapshot.state = blob
        else:
            name = f"snapshot/{aggregate}/{aggregate_id}"
            store = await self.conn.artifacts()
            await store.put(name, blob)
            snapshot.object_name = name
        kv = await self.conn.kv(self.names.snapshots)
        await kv.put(self._snapshot_key(aggregate, aggregate_id), msgspec.msgpack.encode(snapshot))


async def _off_loop(fn: Callable[..., bytes], data: bytes, *args: int) -> bytes:
    """Run zlib on a worker thread when the payload is big enough to stall the event loop
    (zlib releases the GIL)."""
    if len(data) < OFF_LOOP_BYTES:
        return fn(data, *args)
    return await asyncio.to_thread(fn, data, *args)
