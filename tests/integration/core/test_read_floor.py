"""A handler's fold includes the event that woke it, even when a replica answers from behind.

A lagging replica is what a restarted cluster node is for a few moments; here the log itself
is "behind" the handled position until the test appends the event, so the read really has
to wait for it (a real nats-server, the repository's own reads counted to order the steps).
"""

from __future__ import annotations

import asyncio

import pytest
from longhaul.core import repository as repository_module
from longhaul.core.connection import Connection
from longhaul.core.consumer import ConsumerSpec, Delivery, consume
from longhaul.core.read_floor import StaleRead, floor_for, reading_after
from longhaul.core.repository import traces
from longhaul.core.store import EventPage, EventStore, Position
from longhaul.core.transient import is_transient
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.ids import new_id


class ReadCountingStore(EventStore):
    """The real store, telling the test when a fold has read a page."""

    def __init__(self, conn: Connection) -> None:
        super().__init__(conn)
        self.pages = 0
        self.read = asyncio.Event()

    async def read_page(
        self, aggregate: Aggregate, aggregate_id: str, *, after: int, with_seqs: bool = False
    ) -> EventPage:
        page = await super().read_page(aggregate, aggregate_id, after=after, with_seqs=with_seqs)
        self.pages += 1
        self.read.set()
        return page


async def next_seq(conn: Connection) -> int:
    info = await conn.js.stream_info(conn.names.stream)
    return int(info.state.last_seq) + 1


async def started(store: EventStore) -> tuple[str, int]:
    trace_id = new_id("t")
    [first] = await store.append(
        "trace",
        trace_id,
        [ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])],
        expected=Position(),
    )
    return trace_id, first.seq


async def test_a_fold_behind_the_event_being_handled_reads_again_until_it_holds_it(
    conn: Connection,
) -> None:
    store = ReadCountingStore(conn)
    trace_id, first = await started(store)
    woken_by = await next_seq(conn)
    with reading_after("trace", trace_id, woken_by):
        loading = asyncio.create_task(traces(store).load(trace_id))
    await asyncio.wait_for(store.read.wait(), 10)  # it read, and found only the first event
    [reply] = await store.append(
        "trace",
        trace_id,
        [ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant", content="there")],
        expected=Position(first, 1),
    )
    state = await asyncio.wait_for(loading, 10)
    assert reply.seq == woken_by
    assert state.stream_seq == woken_by
    assert [m.content for m in state.main_path()] == ["hi", "there"]
    assert store.pages >= 2


async def test_a_replica_that_stays_behind_is_a_transient_error(
    conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repository_module, "STALE_READ_WAIT_S", 0.3)
    store = EventStore(conn)
    trace_id, first = await started(store)
    with reading_after("trace", trace_id, first + 1000), pytest.raises(StaleRead) as raised:
        await traces(store).load(trace_id)
    assert is_transient(raised.value)  # the consumer retries the handling, never poison
    assert f"read up to {first}, woken by {first + 1000}" in str(raised.value)


async def test_an_aggregate_deleted_since_loads_as_missing(
    conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(repository_module, "STALE_READ_WAIT_S", 0.3)
    with reading_after("trace", "t_gone", 10_000):
        state = await traces(EventStore(conn)).load("t_gone")
    assert not state.exists


async def test_the_floor_is_only_for_the_aggregate_being_handled(conn: Connection) -> None:
    store = ReadCountingStore(conn)
    trace_id, first = await started(store)
    other, _ = await started(store)
    with reading_after("trace", other, first + 1000):
        state = await traces(store).load(trace_id)
    with reading_after("task", trace_id, first + 1000):
        same_id_other_kind = await traces(store).load(trace_id)
    assert state.stream_seq == same_id_other_kind.stream_seq == first
    assert store.pages == 2  # one read each: no waiting


async def test_the_consumer_loop_sets_the_floor_of_each_delivery(conn: Connection) -> None:
    store = EventStore(conn)
    seen: asyncio.Queue[tuple[str, int, int]] = asyncio.Queue()

    async def handler(delivery: Delivery) -> None:
        floor = floor_for(delivery.aggregate, delivery.aggregate_id)
        await seen.put((delivery.aggregate_id, delivery.stream_seq, floor))

    shutdown = asyncio.Event()
    spec = ConsumerSpec(
        durable="floor-test", subjects=[conn.names.type_filter("trace", "trace_created")]
    )
    consuming = asyncio.create_task(consume(conn, spec, handler, shutdown))
    try:
        trace_id, first = await started(store)
        assert await asyncio.wait_for(seen.get(), 10) == (trace_id, first, first)
    finally:
        shutdown.set()
        await asyncio.wait_for(consuming, 10)
    assert floor_for("trace", trace_id) == 0  # nothing outside the handling
