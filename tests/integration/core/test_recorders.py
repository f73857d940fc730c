"""One conformance suite over both recorders: the JetStream event store (a real nats-server)
and the in-memory one the unit tests decide against. Whatever a unit test learns from
:class:`MemoryStore` holds for the store services run on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import cast

import msgspec
import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.eventlog import EventLog
from longhaul.core.memory import MemorySnapshots, MemoryStore
from longhaul.core.provision import ProvisionSettings
from longhaul.core.repository import traces
from longhaul.core.service import ServiceContext
from longhaul.core.snapshots import PackedSnapshot, SnapshotIO, SnapshotStore, pack_snapshot
from longhaul.core.store import ConcurrencyError, EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.events import Unreadable
from longhaul.domain.ids import new_id
from longhaul.domain.state import InvalidTransition, TraceState

from tests.support.folds import shape_4_story

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


def message(sequence: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence, parent_sequence=sequence - 1, role="assistant", content=text
    )


@pytest.fixture(params=["jetstream", "memory"])
def recorder(request: pytest.FixtureRequest) -> EventLog:
    if request.param == "memory":
        return MemoryStore()
    store: EventStore = request.getfixturevalue("store")
    return store


@pytest.fixture
async def atomic_store(nats_config: NatsConfig) -> AsyncIterator[EventStore]:
    """The event store with atomic batches on (``nats.atomic_batches``)."""
    config = nats_config.model_copy(update={"atomic_batches": True})
    conn = await connect(config, provision_settings=ProvisionSettings())
    try:
        yield EventStore(conn)
    finally:
        await conn.close()


@pytest.fixture(params=["jetstream", "memory"])
def atomic_recorder(request: pytest.FixtureRequest) -> EventLog:
    """Both recorders with atomic batches: JetStream's (nats-server 2.12+) and memory's."""
    if request.param == "memory":
        return MemoryStore(atomic=True)
    store: EventStore = request.getfixturevalue("atomic_store")
    return store


async def test_appends_only_at_the_expected_position_and_stamps_each_event(
    recorder: EventLog,
) -> None:
    trace_id = new_id("t")
    [first] = await recorder.append("trace", trace_id, [CREATED], expected=Position(), actor="a")
    assert (first.event.aggregate_id, first.event.n, first.event.actor) == (trace_id, 1, "a")
    with pytest.raises(ConcurrencyError):
        await recorder.append("trace", trace_id, [message(2, "x")], expected=Position())
    [second] = await recorder.append(
        "trace", trace_id, [message(2, "x")], expected=Position(first.seq, 1)
    )
    assert second.seq > first.seq and second.event.n == 2


async def test_a_retried_event_is_stored_once_and_another_event_n_conflicts(
    recorder: EventLog,
) -> None:
    trace_id = new_id("t")
    [first] = await recorder.append("trace", trace_id, [CREATED], expected=Position())
    [again] = await recorder.append("trace", trace_id, [first.event], expected=Position())
    assert again.seq == first.seq
    assert [r.seq async for r in recorder.replay("trace", trace_id)] == [first.seq]
    with pytest.raises(ConcurrencyError):
        other = ev.TraceCreated(messages=[], name="other")
        await recorder.append("trace", trace_id, [other], expected=Position())


async def test_replay_read_page_exists_and_last_position_agree(recorder: EventLog) -> None:
    a, b = new_id("t"), new_id("t")
    [first] = await recorder.append("trace", a, [CREATED], expected=Position())
    await recorder.append("trace", b, [CREATED], expected=Position())
    [second] = await recorder.append("trace", a, [message(2, "x")], expected=Position(first.seq, 1))
    replayed = [(r.event.type, r.seq) async for r in recorder.replay("trace", a)]
    assert replayed == [("trace_created", first.seq), ("message_appended", second.seq)]
    assert [r.event.n async for r in recorder.replay("trace", a, after=first.seq)] == [2]

    page = await recorder.read_page("trace", a, after=0, with_seqs=True)
    assert [e.type for e in page.events if isinstance(e, ev.Event)] == [t for t, _ in replayed]
    assert page.seqs == [first.seq, second.seq] and page.last_seq == second.seq
    assert not page.full
    bare = await recorder.read_page("trace", a, after=first.seq)
    assert len(bare.events) == 1 and bare.seqs == [] and bare.last_seq == second.seq

    assert await recorder.exists("trace", a) and not await recorder.exists("trace", new_id("t"))
    assert await recorder.last_position("trace", a) == Position(second.seq, 2)
    assert await recorder.last_position("trace", new_id("t")) == Position()


async def test_the_repositorys_named_reads_agree_over_both(recorder: EventLog) -> None:
    """What services read without a fold: the first event, the last type, counts by id and a
    raw range; and an imported log written whole, never onto an aggregate that exists."""
    repository = traces(recorder)
    a, b = new_id("t"), new_id("t")
    assert await repository.first(a) is None and await repository.last_type(a) is None
    [first, second] = await recorder.append(
        "trace", a, [CREATED, message(2, "x")], expected=Position()
    )
    await recorder.append("trace", b, [CREATED], expected=Position())
    assert await repository.first(a) == first
    assert await repository.last_type(a) == "message_appended"
    assert await repository.last_type(b) == "trace_created"
    created = await repository.counts("trace_created")
    assert created[a] == created[b] == 1
    answered = await repository.counts("message_appended")
    assert answered[a] == 1 and b not in answered
    assert [r async for r in repository.replay(a, after=first.seq)] == [second]

    imported = new_id("t")
    written = await repository.import_log(imported, [CREATED, message(2, "y")], actor="import")
    assert [(r.event.n, r.event.actor) for r in written] == [(1, "import"), (2, "import")]
    assert [r async for r in repository.replay(imported)] == written
    with pytest.raises(ConcurrencyError):
        await repository.import_log(imported, [ev.TraceCreated(messages=[])], actor="import")


async def test_an_unreadable_first_event_is_named_not_decoded(store: EventStore) -> None:
    trace_id = new_id("t")
    names = store.names
    ack = await store.conn.js.publish(names.subject("trace", trace_id, "trace_created"), b"{")
    first = await traces(store).first(trace_id)
    assert isinstance(first, Unreadable) and first.stream_seq == ack.seq


async def test_a_service_builds_trace_folds_over_another_connection(conn: Connection) -> None:
    """The executor's import writer has a NATS user of its own: its repository is built by
    the composition root over that connection, not by the service around a recorder."""
    ctx = ServiceContext(name="executor", config=LonghaulConfig(), conn=cast(Connection, None))
    trace_id = new_id("t")
    assert await ctx.traces_over(conn).create(trace_id, CREATED, actor="import") is not None
    assert (await traces(EventStore(conn)).load(trace_id)).exists


async def test_watch_yields_the_past_then_live_events(recorder: EventLog) -> None:
    trace_id = new_id("t")
    [first] = await recorder.append("trace", trace_id, [CREATED], expected=Position())
    seen: list[int] = []

    async def follow() -> None:
        async for recorded in recorder.watch("trace", trace_id):
            seen.append(recorded.event.n)
            if recorded.event.n == 2:
                return

    watcher = asyncio.create_task(follow())
    await recorder.append("trace", trace_id, [message(2, "live")], expected=Position(first.seq, 1))
    await asyncio.wait_for(watcher, 10)
    assert seen == [1, 2]


async def test_an_append_in_flight_settles_to_its_record_or_to_a_conflict(
    recorder: EventLog,
) -> None:
    trace_id = new_id("t")
    [first] = await recorder.append("trace", trace_id, [CREATED], expected=Position())
    in_flight = await recorder.begin_append(
        "trace", trace_id, [message(2, "a")], expected=Position(first.seq, 1), actor="test"
    )
    assert [e.n for e in in_flight.events] == [2]
    [recorded] = await in_flight.settle()
    assert recorded.seq > first.seq and recorded.event.aggregate_id == trace_id

    late = await recorder.begin_append(
        "trace", trace_id, [message(3, "stale")], expected=Position(first.seq, 1)
    )
    with pytest.raises(ConcurrencyError):
        await late.settle()


def next_message(state: TraceState) -> list[ev.Event]:
    n = state.version + 1
    return [message(n, f"m{n}")]


async def test_the_repository_folds_both_to_the_same_state(store: EventStore) -> None:
    memory = MemoryStore()
    trace_id = new_id("t")
    folds = []
    for recorder in (store, memory):
        repository = traces(recorder)
        state = await repository.create(trace_id, CREATED, actor="test")
        assert state is not None
        for _ in range(4):
            await repository.save(trace_id, state, next_message, actor="x")
        folds.append(await repository.load(trace_id))
    jetstream, in_memory = folds
    assert [m.content for m in jetstream.main_path()] == [m.content for m in in_memory.main_path()]
    assert (
        (jetstream.version, jetstream.status)
        == (in_memory.version, in_memory.status)
        == (5, "running")
    )


@pytest.fixture(params=["jetstream", "memory"])
def recorder_and_snapshots(request: pytest.FixtureRequest) -> tuple[EventLog, SnapshotIO]:
    if request.param == "memory":
        return MemoryStore(), MemorySnapshots()
    store: EventStore = request.getfixturevalue("store")
    return store, SnapshotStore(request.getfixturevalue("conn"))


async def test_a_snapshot_of_another_fold_shape_is_not_read(
    recorder_and_snapshots: tuple[EventLog, SnapshotIO],
) -> None:
    """A fold whose fields moved (``SCHEMA`` raised) replays the log instead of decoding an old
    snapshot into the wrong fields."""
    recorder, snapshots = recorder_and_snapshots
    trace_id = new_id("t")
    repository = traces(recorder, snapshots=snapshots)
    state = await repository.create(trace_id, CREATED, actor="test")
    assert state is not None
    await repository.save(trace_id, state, next_message, actor="x")
    stale = msgspec.structs.replace(state, name="from an old shape")
    packed = pack_snapshot(stale)
    await snapshots.write("trace", trace_id, packed._replace(schema=TraceState.SCHEMA - 1))
    assert (await repository.load(trace_id)).name != "from an old shape"
    await snapshots.write("trace", trace_id, packed)
    assert (await repository.load(trace_id)).name == "from an old shape"  # same shape: read


async def test_a_trace_an_older_build_snapshotted_loads_from_it_and_finishes(
    recorder_and_snapshots: tuple[EventLog, SnapshotIO],
) -> None:
    """Upgrade in place: the log and the shape-4 snapshot an older build left are read by this
    one — the snapshot upgraded to the same fold a replay gives, and the trace goes on."""
    recorder, snapshots = recorder_and_snapshots
    events, snapshot = shape_4_story()
    trace_id = events[0].aggregate_id
    recorded = await recorder.append("trace", trace_id, events, expected=Position())
    assert [r.seq for r in recorded] == list(range(1, len(events) + 1))  # as the snapshot says
    await snapshots.write(
        "trace", trace_id, PackedSnapshot(snapshot, len(events), len(events), schema=4)
    )
    from_snapshot = await snapshots.read("trace", trace_id, TraceState)
    assert from_snapshot is not None
    replayed = await traces(recorder).load(trace_id)
    assert msgspec.to_builtins(from_snapshot) == msgspec.to_builtins(replayed)

    repository = traces(recorder, snapshots=snapshots)
    state = await repository.load(trace_id)
    await repository.save(
        trace_id, state, lambda s: [ev.HumanReplied(content="the main one")], actor="gateway"
    )
    head = state.head_sequence
    await repository.save(
        trace_id,
        state,
        lambda s: [
            ev.MessageAppended(
                sequence=head + 1,
                parent_sequence=head,
                role="tool",
                tool_call_id="c_ask",
                content="the main one",
            ),
            ev.Completed(summary="paid"),
        ],
        actor="executor",
    )
    assert state.status == "completed"
    assert (await traces(recorder).load(trace_id)).status == "completed"


async def test_a_batch_is_stored_whole_or_not_at_all(atomic_recorder: EventLog) -> None:
    """Several events appended at once are one atomic batch: at consecutive positions when
    the expected position holds; nothing at all when it is stale; and a batch retried with
    the same ids (its acknowledgement lost) answers what is stored, never writes it twice."""
    recorder = atomic_recorder
    assert recorder.atomic
    trace_id = new_id("t")
    [first] = await recorder.append("trace", trace_id, [CREATED], expected=Position())
    batch = [message(2, "a"), message(3, "b"), message(4, "c")]
    stored = await recorder.append("trace", trace_id, batch, expected=Position(first.seq, 1))
    assert [r.event.n for r in stored] == [2, 3, 4]
    assert [r.seq for r in stored] == list(range(stored[0].seq, stored[0].seq + 3))

    with pytest.raises(ConcurrencyError):  # stale: the log moved past position 1
        await recorder.append(
            "trace", trace_id, [message(2, "x"), message(3, "y")], expected=Position(first.seq, 1)
        )
    again = await recorder.append(
        "trace", trace_id, [r.event for r in stored], expected=Position(first.seq, 1)
    )
    assert again == stored
    in_flight = await recorder.begin_append(
        "trace", trace_id, [message(5, "d"), message(6, "e")], expected=Position(first.seq, 1)
    )
    with pytest.raises(ConcurrencyError):
        await in_flight.settle()
    assert [r.seq async for r in recorder.replay("trace", trace_id)] == [
        first.seq,
        *(r.seq for r in stored),
    ]


async def test_a_batch_whose_last_event_the_fold_refuses_writes_none_of_it(
    atomic_recorder: EventLog,
) -> None:
    """The repository checks a batch in order, each event against the fold the previous one
    left, before anything is sent: a refusal anywhere leaves the log and the fold as they
    were (without atomic batches events are checked and appended one by one, as before)."""
    recorder = atomic_recorder
    repository = traces(recorder)
    trace_id = new_id("t")
    state = await repository.create(trace_id, CREATED, actor="test")
    assert state is not None
    with pytest.raises(InvalidTransition):
        await repository.save(
            trace_id,
            state,
            lambda s: [message(2, "a"), ev.Completed(summary="done"), message(3, "late")],
            actor="x",
        )
    assert (state.version, state.status, state.last_sequence) == (1, "running", 1)
    assert await recorder.last_position("trace", trace_id) == Position(state.stream_seq, 1)
    written = await repository.save(
        trace_id, state, lambda s: [message(2, "a"), ev.Completed(summary="done")], actor="x"
    )
    assert [r.event.n for r in written] == [2, 3] and state.status == "completed"
    assert state.stream_seq == written[-1].seq
