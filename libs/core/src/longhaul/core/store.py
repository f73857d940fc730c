"""The event store, a recorder: append with optimistic concurrency, replay, live watch.

It stores and reads events and knows nothing of what they mean: folding them into state
(catch-up, fault skipping) is the repository's work (:mod:`~longhaul.core.repository`), and
snapshots live beside the log (:mod:`~longhaul.core.snapshots`). An import contract keeps this
module free of the state folds.

Append rule (docs/07-the-log.md): each event is published with
``Nats-Expected-Last-Subject-Sequence`` (the stream sequence of the aggregate's last event) on
the aggregate's wildcard subject, and ``Nats-Msg-Id: <id>:<n>``. nats-server checks the
expected sequence before the Msg-Id, so a retry of a publish that landed is refused ("wrong
last sequence"), not answered as a duplicate: a refusal is settled by reading what follows the
expected position (ours, another writer's, or nothing yet: publish again). A duplicate ack
whose stored payload differs from ours means two writers produced event ``n``: that is a
conflict, not a success. The event's
``trace_context`` travels as headers too (``traceparent``…, see ``longhaul.core.telemetry``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from typing import NamedTuple

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.direct_get import direct_page
from longhaul.core.telemetry import carrier_headers, current_carrier
from longhaul.core.transient import is_transient, retry_transient
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate, Unreadable
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import APIError, NotFoundError

log = logging.getLogger(__name__)
WRONG_LAST_SEQUENCE = 10071
SUBJECT_IN_PROCESS = 10164
"""A cluster's bare "wrong last sequence": another write with an expected-sequence check on
the same aggregate is still being proposed, so the check cannot be made now (nats-server
2.15, ``jetstream_batching.go``). The same question as 10071, answered the same way."""
DUPLICATE_IN_PROCESS = 10158
"""A cluster's "duplicate message id is in process": a retry met its own attempt in flight."""
ATOMIC_DISABLED = 10174
"""nats-server's "atomic publish is disabled": the stream has no ``allow_atomic``."""
BATCH_INCOMPLETE = 10176
"""An atomic batch whose commit came without all its messages (one lost on the way)."""
BATCH_TOO_MANY = 10210
"""nats-server's "atomic publish too many inflight" (50 batches a stream): wait, try again."""
BATCH_DUPLICATE_ID = 10201
"""An atomic batch holding a ``Nats-Msg-Id`` the stream has seen: a batch is refused whole,
never answered as a duplicate (nats-server 2.15.1, measured)."""
MAX_BATCH = 1000
"""nats-server's most messages in one atomic batch."""
BATCH_ID = "Nats-Batch-Id"
BATCH_SEQUENCE = "Nats-Batch-Sequence"
BATCH_COMMIT = "Nats-Batch-Commit"
REPLAY_PAGE = 2048
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
FREE = 0
""":meth:`EventStore._slots_after`'s answer when nothing follows the expected position yet."""


class ConcurrencyError(Exception):
    """Another writer appended to the aggregate first: re-replay and decide again."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.recorded: list[Recorded] = []
        """What the refused append stored before the refusal: always none of an atomic
        batch; the events before it when appending one by one."""


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


class EventPage(msgspec.Struct):
    """One batch of an aggregate's log as a fold reads it: every stored item in order, an
    undecodable payload as :class:`~longhaul.domain.events.Unreadable`, and where the batch
    ended. ``seqs`` (each item's stream sequence) only when asked for."""

    last_seq: int
    events: list[ev.Event | Unreadable] = msgspec.field(default_factory=list)
    seqs: list[int] = msgspec.field(default_factory=list)

    @property
    def full(self) -> bool:
        """A whole page: more may follow."""
        return len(self.events) >= REPLAY_PAGE


async def answer_within(future: asyncio.Future[api.PubAck], timeout_s: float) -> api.PubAck:
    """``asyncio.wait_for(future, timeout_s)`` without its waiter future and callbacks, paid on
    every append a step waits for: under ``asyncio.timeout`` the awaited future is cancelled
    with the caller, and the expiry becomes TimeoutError."""
    async with asyncio.timeout(timeout_s):
        return await future


def _retrieve(future: asyncio.Future[api.PubAck]) -> None:
    """Mark an acknowledgement's error as seen: a turn cancelled before settling must not
    log "exception never retrieved" (the replay afterwards finds out what landed)."""
    if not future.cancelled():
        future.exception()


class Outgoing(NamedTuple):
    """One message of an append as published: what a retry publishes again."""

    subject: str
    payload: bytes
    headers: dict[str, str]


class PendingAppend:
    """Events published by :meth:`EventStore.begin_append`, their acknowledgement not yet
    awaited: one message, or several as one atomic batch (only its commit is answered).
    :meth:`settle` turns them into :class:`Recorded` or the append's error."""

    def __init__(
        self,
        store: EventStore,
        events: list[ev.Event],
        messages: list[Outgoing],
        expected_seq: int,
        ack: asyncio.Future[api.PubAck],
    ) -> None:
        self.store = store
        self.events = events
        """The events as stamped (their ``n``) and published."""
        self._messages = messages
        self._expected_seq = expected_seq
        self._ack = ack
        ack.add_done_callback(_retrieve)
        self._settled: list[Recorded] | None = None

    async def settle(self) -> list[Recorded]:
        """Wait for the server's answer (retrying a lost one with the same ``Nats-Msg-Id``s).

        Raises :class:`ConcurrencyError` if the aggregate moved past the expected position
        first, or if another writer stored one of these event numbers; the transport's error
        when the server never answered. Settling twice returns the same records."""
        if self._settled is None:
            seqs = await self._acknowledged_seqs()
            self._settled = [Recorded(e, s) for e, s in zip(self.events, seqs, strict=True)]
        return self._settled

    async def _acknowledged_seqs(self) -> list[int]:
        store, first = self.store, self.events[0]
        aggregate, aggregate_id = first.aggregate, first.aggregate_id
        count = len(self.events)
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
                        else await answer_within(self._ack, store.conn.request_timeout_s)
                    )
                else:
                    ack = await asyncio.wait_for(
                        await store._publish(self._messages), store.conn.request_timeout_s
                    )
                break
            except APIError as exc:
                if exc.err_code in (WRONG_LAST_SEQUENCE, SUBJECT_IN_PROCESS, BATCH_DUPLICATE_ID):
                    # A refusal is no proof of a conflict (docs/07-the-log.md, "A refused
                    # append"): what follows ``expected_seq`` on the log decides. A batch
                    # retried after its commit landed is refused for its message ids.
                    found = await retry_transient(
                        lambda: store._slots_after(
                            aggregate,
                            aggregate_id,
                            self._expected_seq,
                            [m.payload for m in self._messages],
                        ),
                        what=f"append to {aggregate} {aggregate_id}",
                        within_s=max(deadline - time.monotonic(), BACKOFF_MAX_S),
                    )
                    if found is None or (found == FREE and time.monotonic() + delay > deadline):
                        raise ConcurrencyError(
                            f"{aggregate} {aggregate_id} moved past sequence {self._expected_seq}"
                        ) from exc
                    if found != FREE:
                        return list(range(found, found + count))
                elif exc.err_code == ATOMIC_DISABLED:
                    # The stream lost its setting (recreated by an older build): one by one.
                    store.atomic_lost(exc.description)
                    recorded = await store.append_one_by_one(
                        aggregate,
                        aggregate_id,
                        self.events,
                        expected=Position(self._expected_seq, first.n - 1),
                    )
                    return [r.seq for r in recorded]
                elif exc.err_code in (DUPLICATE_IN_PROCESS, BATCH_INCOMPLETE, BATCH_TOO_MANY):
                    # A cluster still proposing our earlier attempt, a batch whose first
                    # messages were lost or refused on the way (too many batches open at
                    # once): ask again (a new batch, the same ids).
                    if time.monotonic() + delay > deadline:
                        raise
                elif not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
            except Exception as exc:
                # A leader election, a node going: the publish may have landed. The retry is
                # harmless: it carries the same expected sequence (at most one lands; its
                # refusal is settled by the log) and Msg-Ids (a duplicate's ack names the first).
                if not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(BACKOFF_MAX_S, delay * 2)
        assert ack is not None
        seq = int(ack.seq)
        if ack.duplicate:
            # Our event landed: a read that times out now must not fail the append.
            stored = await retry_transient(
                lambda: store.conn.js.get_msg(store.names.stream, seq),
                what=f"append to {aggregate} {aggregate_id}",
                within_s=max(deadline - time.monotonic(), BACKOFF_MAX_S),
            )
            if stored.data != self._messages[0].payload:
                raise ConcurrencyError(
                    f"{aggregate} {aggregate_id} event {first.n} was written by another writer"
                )
        # A batch is stored in order at consecutive sequences, its commit's the last.
        return list(range(seq - count + 1, seq + 1))


class OneByOne:
    """Several events begun without atomic batches (an older server, or a stream created
    without ``allow_atomic``): the first is in flight, the others are appended one by one,
    each awaited, when it settles — today's appends, one round trip each."""

    def __init__(self, first: PendingAppend, rest: list[ev.Event]) -> None:
        self.events = [*first.events, *rest]
        self._first = first
        self._rest = rest
        self._settled: list[Recorded] | None = None

    async def settle(self) -> list[Recorded]:
        if self._settled is None:
            [recorded] = await self._first.settle()
            first = recorded.event
            rest = await self._first.store.append_one_by_one(
                first.aggregate,
                first.aggregate_id,
                self._rest,
                expected=Position(recorded.seq, first.n),
                landed=[recorded],
            )
            self._settled = [recorded, *rest]
        return self._settled


class EventStore:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.names = conn.names

    @property
    def atomic(self) -> bool:
        """Whether an append of several events is all or nothing (one atomic batch: nats-server
        2.12+ and a stream with ``allow_atomic``), found when the connection was opened."""
        return self.conn.atomic_batches

    def atomic_lost(self, why: str | None) -> None:
        """The server refused a batch: append one by one from now on (said once)."""
        if self.conn.atomic_batches:
            self.conn.atomic_batches = False
            log.warning(
                "stream %s refused an atomic batch (%s): events are appended one by one",
                self.names.stream,
                why,
            )

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

        With atomic batches the events are stored all or none (in batches of at most
        :data:`MAX_BATCH`), one round trip each; without, one by one.
        Raises :class:`ConcurrencyError` if the aggregate moved past ``expected`` (its
        ``recorded`` lists what this call stored before).
        """
        if not self.atomic:
            return await self.append_one_by_one(
                aggregate,
                aggregate_id,
                events,
                expected=expected,
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
        recorded: list[Recorded] = []
        position = expected
        for start in range(0, len(events), MAX_BATCH):
            pending = await self.begin_append(
                aggregate,
                aggregate_id,
                events[start : start + MAX_BATCH],
                expected=position,
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
            try:
                recorded.extend(await pending.settle())
            except ConcurrencyError as exc:
                exc.recorded = [*recorded, *exc.recorded]
                raise
            position = Position(recorded[-1].seq, recorded[-1].event.n)
        return recorded

    async def append_one_by_one(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        events: Sequence[ev.Event],
        *,
        expected: Position,
        actor: str | None = None,
        causation_id: str | None = None,
        correlation_id: str | None = None,
        landed: Sequence[Recorded] = (),
    ) -> list[Recorded]:
        """Each event appended and awaited before the next (no atomic batches)."""
        recorded: list[Recorded] = []
        position = expected
        for event in events:
            pending = await self.begin_append(
                aggregate,
                aggregate_id,
                [event],
                expected=position,
                actor=actor,
                causation_id=causation_id,
                correlation_id=correlation_id,
            )
            try:
                [one] = await pending.settle()
            except ConcurrencyError as exc:
                exc.recorded = [*landed, *recorded]
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
    ) -> PendingAppend | OneByOne:
        """Publish ``events`` after ``expected`` without waiting for the server's answer: the
        caller does other work (builds the next model request) while the append is in flight,
        and :meth:`PendingAppend.settle` later says whether it landed. Several events travel
        as one atomic batch (at most :data:`MAX_BATCH`); without atomic batches the first is
        in flight and the others are appended when it settles. Nothing else may be appended
        to the aggregate by this writer until then (it needs this one's sequence)."""
        if not events or len(events) > MAX_BATCH:
            raise ValueError(f"an append in flight holds 1 to {MAX_BATCH} events")
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
        atomic = self.atomic
        batch = stamped if atomic else stamped[:1]
        messages = self._messages(batch, expected.seq)
        ack = await self._publish(messages)
        # nats-py queues a publish for its flusher task, which would not run before the caller
        # next waits: one turn of the loop sends it now, so it travels while the caller works.
        await asyncio.sleep(0)
        pending = PendingAppend(self, batch, messages, expected.seq, ack)
        return pending if atomic or len(stamped) == 1 else OneByOne(pending, stamped[1:])

    def _messages(self, stamped: list[ev.Event], expected_seq: int) -> list[Outgoing]:
        """The append rule's messages: the expected position on the first (a batch's checks
        are made against the log as it was before it), a ``Nats-Msg-Id`` on each."""
        messages = []
        for i, event in enumerate(stamped):
            headers = {
                "Nats-Msg-Id": f"{event.aggregate_id}:{event.n}",
                **carrier_headers(event.trace_context),
            }
            if i == 0:
                headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_seq)
                headers["Nats-Expected-Last-Subject-Sequence-Subject"] = (
                    self.names.aggregate_filter(event.aggregate, event.aggregate_id)
                )
            subject = self.names.subject(event.aggregate, event.aggregate_id, event.type)
            messages.append(Outgoing(subject, ev.encode(event), headers))
        return messages

    async def _publish(self, messages: list[Outgoing]) -> asyncio.Future[api.PubAck]:
        """Publish one message, or several as an atomic batch (a new ``Nats-Batch-Id`` each
        attempt; only the commit, the last, is answered): the answer's future."""
        *batch, (subject, payload, headers) = messages
        if batch:
            batch_id = uuid.uuid4().hex
            for seq, (b_subject, b_payload, b_headers) in enumerate(batch, start=1):
                await self.conn.nc.publish(
                    b_subject,
                    b_payload,
                    headers={**b_headers, BATCH_ID: batch_id, BATCH_SEQUENCE: str(seq)},
                )
            headers = {
                **headers,
                BATCH_ID: batch_id,
                BATCH_SEQUENCE: str(len(messages)),
                BATCH_COMMIT: "1",
            }
        else:
            headers = dict(headers)  # nats-py adds the expected stream to what it is given
        return await self.conn.js.publish_async(
            subject, payload, stream=self.names.stream, headers=headers
        )

    def append_headers(self, stamped: ev.Event, expected_seq: int) -> dict[str, str]:
        """The append rule's headers for a stamped event published after ``expected_seq``."""
        return self._messages([stamped], expected_seq)[0].headers

    async def _slots_after(
        self, aggregate: Aggregate, aggregate_id: str, expected_seq: int, payloads: list[bytes]
    ) -> int | None:
        """After a refusal ("wrong last sequence", or a batch's "duplicate message id"): the
        sequence of our first event if ours are the ones right after ``expected_seq`` (an
        earlier attempt landed, its ack lost or late), None if another event is there (or the
        log no longer reaches ``expected_seq``), and :data:`FREE` if the log still ends at
        ``expected_seq``: the server refused while its view was in flux, and publishing again
        is safe (every attempt carries the same expected sequence, so at most one can land)."""
        # Asked of the stream's leader, never a direct get: a replica catching up could miss
        # our own landed events and turn a success into a conflict.
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        if await self._last_seq(subject) == expected_seq:
            return FREE
        stored: list[tuple[int, bytes]] = []
        after = expected_seq
        for _ in payloads:
            try:
                msg = await self.conn.js.get_msg(
                    self.names.stream, seq=after + 1, subject=subject, next=True
                )
            except NotFoundError:
                break
            after = int(msg.seq or 0)
            stored.append((after, msg.data or b""))
        return stored[0][0] if stored and [data for _, data in stored] == payloads else None

    async def _last_seq(self, subject: str) -> int:
        try:
            return int((await self.conn.js.get_msg(self.names.stream, subject=subject)).seq or 0)
        except NotFoundError:
            return 0

    # ------------------------------------------------------------------ replay

    async def replay(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int = 0
    ) -> AsyncGenerator[Recorded, None]:
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
            if not page.full:
                return
            after = page.last_seq

    async def read_page(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int, with_seqs: bool = False
    ) -> EventPage:
        """The next batch of the aggregate's log after stream sequence ``after``, undecodable
        payloads included (a fold records them as faults). Without ``with_seqs`` the server
        sends bare payloads, which halves the cost of a fold (it only needs ``last_seq``)."""
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        return await self._direct_page(subject, after, with_headers=with_seqs)

    async def _direct_page(self, subject: str, after: int, *, with_headers: bool) -> EventPage:
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

    async def _direct_page_once(self, subject: str, after: int, *, with_headers: bool) -> EventPage:
        page = EventPage(last_seq=after)

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
    ) -> AsyncGenerator[Recorded, None]:
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
        """True if the aggregate has any event (one get, answered by the stream's leader)."""
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

    async def first(self, aggregate: Aggregate, aggregate_id: str) -> Recorded | Unreadable | None:
        """The aggregate's first stored event (its creation: one direct read), as
        :class:`Unreadable` when it does not decode, or None when it has none; a leader
        election is waited out like every read."""
        subject = self.names.aggregate_filter(aggregate, aggregate_id)

        async def read() -> Recorded | Unreadable | None:
            try:
                stored = await self.conn.js.get_msg(
                    self.names.stream, seq=1, subject=subject, next=True
                )
            except NotFoundError:
                return None
            seq = int(stored.seq or 0)
            try:
                return Recorded(ev.decode(stored.data or b""), seq)
            except ev.EventDecodeError as exc:
                return Unreadable(error=str(exc)[:500], stream_seq=seq)

        return await retry_transient(
            read, what=f"read {subject}", within_s=self.conn.unavailable_retry_s
        )

    async def last_type(self, aggregate: Aggregate, aggregate_id: str) -> str | None:
        """The type of the aggregate's last event (from its subject: one read, no payload),
        or None when it has none."""
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        try:
            last = await self.conn.js.get_last_msg(self.names.stream, subject)
        except NotFoundError:
            return None
        return (last.subject or "").rsplit(".", 1)[-1]

    async def counts(self, aggregate: Aggregate, event_type: str) -> dict[str, int]:
        """How many ``event_type`` events each aggregate of the kind holds, by id (the
        stream's subject counts: one request, no payloads); aggregates without one are left
        out."""
        info = await self.conn.js.stream_info(
            self.names.stream, subjects_filter=self.names.type_filter(aggregate, event_type)
        )
        return {subject.split(".")[-2]: n for subject, n in (info.state.subjects or {}).items()}
