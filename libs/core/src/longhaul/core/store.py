"""The event store: append with optimistic concurrency, replay, snapshots, live watch.

Append rule (DESIGN.md §3): each event is published with
``Nats-Expected-Last-Subject-Sequence`` (the stream sequence of the aggregate's last event) on
the aggregate's wildcard subject, and ``Nats-Msg-Id: <id>:<n>`` so a retried publish is
de-duplicated by the server. A duplicate ack whose stored payload differs from ours means two
writers produced event ``n``: that is a conflict, not a success.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

import msgspec
import nats.errors
from longhaul.core import events as ev
from longhaul.core.connection import Connection
from longhaul.core.events import Aggregate
from longhaul.core.state import TaskState, TraceState
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import APIError, NotFoundError, ObjectNotFoundError

log = logging.getLogger(__name__)
_json = msgspec.json.Encoder()

WRONG_LAST_SEQUENCE = 10071
SNAPSHOT_INLINE_LIMIT = 512 * 1024
REPLAY_PAGE = 2048
REPLAY_PAGE_TIMEOUT_S = 30.0
PUBLISH_ATTEMPTS = 3

State = TypeVar("State", TraceState, TaskState)


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


class _Snapshot(msgspec.Struct):
    seq: int
    n: int
    state: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))
    object_name: str | None = None


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
            if event.aggregate != aggregate:
                raise ValueError(f"{event.type} is not a {aggregate} event")
            stamped = msgspec.structs.replace(
                event,
                aggregate_id=aggregate_id,
                n=position.n + 1,
                actor=event.actor or actor or "",
                causation_id=event.causation_id or causation_id,
                correlation_id=event.correlation_id or correlation_id,
            )
            seq = await self._publish(aggregate, aggregate_id, stamped, position.seq)
            recorded.append(Recorded(stamped, seq))
            position = Position(seq, stamped.n)
        return recorded

    async def _publish(
        self, aggregate: Aggregate, aggregate_id: str, event: ev.Event, expected_seq: int
    ) -> int:
        payload = ev.encode(event)
        headers = {
            "Nats-Msg-Id": f"{aggregate_id}:{event.n}",
            "Nats-Expected-Last-Subject-Sequence": str(expected_seq),
            "Nats-Expected-Last-Subject-Sequence-Subject": self.names.aggregate_filter(
                aggregate, aggregate_id
            ),
        }
        subject = self.names.subject(aggregate, aggregate_id, event.type)
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                ack = await self.conn.js.publish(
                    subject, payload, stream=self.names.stream, headers=headers
                )
                break
            except APIError as exc:
                if exc.err_code != WRONG_LAST_SEQUENCE:
                    raise
                # Either another writer got there first, or our own earlier attempt landed
                # and its ack was lost: the event right after ``expected_seq`` tells which.
                seq = await self._own_earlier_publish(
                    aggregate, aggregate_id, expected_seq, payload
                )
                if seq is None:
                    raise ConcurrencyError(
                        f"{aggregate} {aggregate_id} moved past sequence {expected_seq}"
                    ) from exc
                return seq
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                # The publish may have landed; the same Msg-Id makes the retry harmless.
                if attempt == PUBLISH_ATTEMPTS:
                    raise
                await asyncio.sleep(0.05 * attempt)
        if ack.duplicate:
            stored = await self.conn.js.get_msg(self.names.stream, ack.seq)
            if stored.data != payload:
                raise ConcurrencyError(
                    f"{aggregate} {aggregate_id} event {event.n} was written by another writer"
                )
        return int(ack.seq)

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
            page = await self._direct_page(subject, after)
            for recorded in page:
                yield recorded
            if len(page) < REPLAY_PAGE:
                return
            after = page[-1].seq

    async def _direct_page(self, subject: str, after: int) -> list[Recorded]:
        page: list[Recorded] = []
        finished: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()

        async def on_message(msg: Msg) -> None:
            if finished.done():
                return
            headers = msg.headers or {}
            status = headers.get("Status")
            if status is not None and not msg.data:
                ok = status in ("204", "404")
                finished.set_result(None if ok else f"{status} {headers.get('Description', '')}")
                return
            try:
                page.append(Recorded(ev.decode(msg.data), int(headers["Nats-Sequence"])))
            except (ev.EventDecodeError, KeyError, ValueError) as exc:
                finished.set_exception(
                    exc if isinstance(exc, ev.EventDecodeError) else ev.EventDecodeError(str(exc))
                )

        inbox = self.conn.nc.new_inbox()
        sub = await self.conn.nc.subscribe(inbox, cb=on_message)
        try:
            request = {"seq": after + 1, "next_by_subj": subject, "batch": REPLAY_PAGE}
            await self.conn.nc.publish(
                f"$JS.API.DIRECT.GET.{self.names.stream}", _json.encode(request), reply=inbox
            )
            error = await asyncio.wait_for(finished, timeout=REPLAY_PAGE_TIMEOUT_S)
        finally:
            await sub.unsubscribe()
        if error is not None:
            raise RuntimeError(f"direct get on {self.names.stream} failed: {error}")
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
                yield Recorded(ev.decode(msg.data), msg.metadata.sequence.stream)
        finally:
            await sub.unsubscribe()

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
        applied = 0
        async for recorded in self.replay(aggregate, aggregate_id, after=state.stream_seq):
            state.apply(recorded.event, recorded.seq)
            applied += 1
        return applied

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
            snapshot = msgspec.json.decode(entry.value, type=_Snapshot)
            raw: bytes | msgspec.Raw = snapshot.state
            if snapshot.object_name:
                store = await self.conn.artifacts()
                raw = (await store.get(snapshot.object_name)).data or b"null"
            return msgspec.json.decode(raw, type=state_type)
        except (msgspec.DecodeError, msgspec.ValidationError, ObjectNotFoundError) as exc:
            # A snapshot is only an optimisation: fall back to a full replay.
            log.warning("ignoring unreadable snapshot of %s %s: %s", aggregate, aggregate_id, exc)
            return None

    async def write_snapshot(
        self, aggregate: Aggregate, aggregate_id: str, state: TraceState | TaskState
    ) -> None:
        """Store the folded state; large states go to the object store with a KV pointer."""
        encoded = msgspec.json.encode(state)
        snapshot = _Snapshot(seq=state.stream_seq, n=state.version)
        if len(encoded) <= SNAPSHOT_INLINE_LIMIT:
            snapshot.state = msgspec.Raw(encoded)
        else:
            name = f"snapshot/{aggregate}/{aggregate_id}"
            store = await self.conn.artifacts()
            await store.put(name, encoded)
            snapshot.object_name = name
        kv = await self.conn.kv(self.names.snapshots)
        await kv.put(self._snapshot_key(aggregate, aggregate_id), msgspec.json.encode(snapshot))

    async def maybe_snapshot(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        state: TraceState | TaskState,
        *,
        previous_version: int,
    ) -> bool:
        """Snapshot when the state crossed a multiple of ``snapshot_every`` since
        ``previous_version``."""
        every = self.snapshot_every
        if every <= 0 or state.version // every == previous_version // every:
            return False
        await self.write_snapshot(aggregate, aggregate_id, state)
        return True
