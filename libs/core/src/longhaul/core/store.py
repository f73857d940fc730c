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
from collections.abc import AsyncGenerator, Sequence

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
DUPLICATE_IN_PROCESS = 10158
"""A cluster's "duplicate message id is in process": a retry met its own attempt in flight."""
REPLAY_PAGE = 2048
BACKOFF_FIRST_S = 0.05
BACKOFF_MAX_S = 1.0
FREE = 0
""":meth:`EventStore._slot_after`'s answer when nothing follows the expected position yet."""


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
                    # A refusal is no proof of a conflict (docs/07-the-log.md, "A refused
                    # append"): what follows ``expected_seq`` on the log decides.
                    found = await retry_transient(
                        lambda: store._slot_after(
                            aggregate, aggregate_id, self._expected_seq, self._payload
                        ),
                        what=f"append to {aggregate} {aggregate_id}",
                        within_s=max(deadline - time.monotonic(), BACKOFF_MAX_S),
                    )
                    if found is None or (found == FREE and time.monotonic() + delay > deadline):
                        raise ConcurrencyError(
                            f"{aggregate} {aggregate_id} moved past sequence {self._expected_seq}"
                        ) from exc
                    if found != FREE:
                        return found
                elif exc.err_code == DUPLICATE_IN_PROCESS:
                    # A cluster still proposing our earlier attempt: ask again once it is done.
                    if time.monotonic() + delay > deadline:
                        raise
                elif not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
            except Exception as exc:
                # A leader election, a node going: the publish may have landed. The retry is
                # harmless: it carries the same expected sequence (at most one lands; its
                # refusal is settled by the log) and Msg-Id (a duplicate's ack names the first).
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
            if stored.data != self._payload:
                raise ConcurrencyError(
                    f"{aggregate} {aggregate_id} event {event.n} was written by another writer"
                )
        return seq


class EventStore:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.names = conn.names

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
        headers = self.append_headers(stamped, expected.seq)
        subject = self.names.subject(aggregate, aggregate_id, stamped.type)
        ack = await self.conn.js.publish_async(
            subject, payload, stream=self.names.stream, headers=headers
        )
        # nats-py queues a publish for its flusher task, which would not run before the caller
        # next waits: one turn of the loop sends it now, so it travels while the caller works.
        await asyncio.sleep(0)
        return PendingAppend(self, stamped, subject, payload, headers, expected.seq, ack)

    def append_headers(self, stamped: ev.Event, expected_seq: int) -> dict[str, str]:
        """The append rule's headers for a stamped event published after ``expected_seq``."""
        aggregate, aggregate_id = stamped.aggregate, stamped.aggregate_id
        return {
            "Nats-Msg-Id": f"{aggregate_id}:{stamped.n}",
            "Nats-Expected-Last-Subject-Sequence": str(expected_seq),
            "Nats-Expected-Last-Subject-Sequence-Subject": self.names.aggregate_filter(
                aggregate, aggregate_id
            ),
            **carrier_headers(stamped.trace_context),
        }

    async def _slot_after(
        self, aggregate: Aggregate, aggregate_id: str, expected_seq: int, payload: bytes
    ) -> int | None:
        """After a "wrong last sequence" refusal: the sequence of our own event if it is the
        one right after ``expected_seq`` (an earlier attempt landed, its ack lost or late),
        None if another event is there (or the log no longer reaches ``expected_seq``), and
        :data:`FREE` if the log still ends at ``expected_seq``: the server refused while its
        view was in flux, and publishing again is safe (every attempt carries the same
        expected sequence, so at most one can land)."""
        subject = self.names.aggregate_filter(aggregate, aggregate_id)
        try:
            stored = await self.conn.js.get_msg(
                self.names.stream, seq=expected_seq + 1, subject=subject, next=True
            )
        except NotFoundError:
            return FREE if await self._last_seq(subject) == expected_seq else None
        return int(stored.seq or 0) if stored.data == payload else None

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
