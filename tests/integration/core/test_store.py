"""Event store against a real nats-server."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os

import msgspec
import pytest
from longhaul.core.connection import Connection
from longhaul.core.direct_get import OBJECT_PAGE, DirectGetError, read_object
from longhaul.core.provision import ProvisionSettings, provision
from longhaul.core.repository import traces
from longhaul.core.snapshots import SnapshotStore, pack_snapshot
from longhaul.core.store import ConcurrencyError, EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState

from tests.support.folds import trace_state


def created(text: str = "hello") -> ev.TraceCreated:
    return ev.TraceCreated(messages=[ev.InputMessage(role="user", content=text)])


def assistant(seq: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(sequence=seq, parent_sequence=seq - 1, role="assistant", content=text)


def user(seq: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(sequence=seq, parent_sequence=seq - 1, role="user", content=text)


async def test_append_and_replay_round_trip(store: EventStore) -> None:
    trace_id = new_id("t")
    recorded = await store.append(
        "trace", trace_id, [created(), assistant(2, "hi there")], expected=Position(), actor="test"
    )
    assert [r.event.n for r in recorded] == [1, 2]
    assert recorded[0].seq < recorded[1].seq
    replayed = [r async for r in store.replay("trace", trace_id)]
    assert [r.event for r in replayed] == [r.event for r in recorded]
    assert replayed[1].event.aggregate_id == trace_id
    assert replayed[1].event.actor == "test"
    state = await trace_state(store, trace_id)
    assert [m.content for m in state.main_path()] == ["hello", "hi there"]
    assert state.stream_seq == recorded[-1].seq


async def test_replay_of_unknown_aggregate_is_empty(store: EventStore) -> None:
    assert [r async for r in store.replay("trace", "t_missing")] == []
    state = await trace_state(store, "t_missing")
    assert not state.exists


async def test_replay_after_position_returns_only_the_tail(store: EventStore) -> None:
    trace_id = new_id("t")
    first = await store.append("trace", trace_id, [created()], expected=Position())
    await store.append("trace", trace_id, [assistant(2, "a")], expected=Position(first[0].seq, 1))
    tail = [r async for r in store.replay("trace", trace_id, after=first[0].seq)]
    assert [r.event.n for r in tail] == [2]


async def test_concurrent_writers_exactly_one_wins(store: EventStore) -> None:
    trace_id = new_id("t")
    [first] = await store.append("trace", trace_id, [created()], expected=Position())
    base = Position(first.seq, 1)
    results = await asyncio.gather(
        store.append("trace", trace_id, [assistant(2, "writer a")], expected=base),
        store.append("trace", trace_id, [assistant(2, "writer b")], expected=base),
        return_exceptions=True,
    )
    wins = [r for r in results if isinstance(r, list)]
    conflicts = [r for r in results if isinstance(r, ConcurrencyError)]
    assert len(wins) == 1 and len(conflicts) == 1
    state = await trace_state(store, trace_id)
    assert state.last_sequence == 2
    assert state.messages[2].content == wins[0][0].event.content  # type: ignore[attr-defined]


async def test_other_aggregates_do_not_conflict(store: EventStore) -> None:
    a, b = new_id("t"), new_id("t")
    await store.append("trace", a, [created()], expected=Position())
    await store.append("trace", b, [created()], expected=Position())
    assert (await trace_state(store, a)).exists and (await trace_state(store, b)).exists


async def test_duplicate_publish_is_deduplicated(store: EventStore) -> None:
    trace_id = new_id("t")
    event = created()
    [first] = await store.append("trace", trace_id, [event], expected=Position())
    # A retry of the very same event (lost ack): same Msg-Id, same payload → same sequence.
    [again] = await store.append("trace", trace_id, [first.event], expected=Position())
    assert again.seq == first.seq
    assert len([r async for r in store.replay("trace", trace_id)]) == 1


async def test_duplicate_with_different_payload_is_a_conflict(
    store: EventStore, conn: Connection
) -> None:
    trace_id = new_id("t")
    [first] = await store.append("trace", trace_id, [created("one")], expected=Position())
    # Bypass the expected-sequence check to reach the de-duplication path directly.
    other = msgspec.structs.replace(created("two"), aggregate_id=trace_id, n=1)
    ack = await conn.js.publish(
        conn.names.subject("trace", trace_id, "trace_created"),
        ev.encode(other),
        headers={"Nats-Msg-Id": f"{trace_id}:1"},
    )
    assert ack.duplicate and ack.seq == first.seq
    with pytest.raises(ConcurrencyError):
        await store.append("trace", trace_id, [created("two")], expected=Position())


async def test_batched_append_keeps_order(store: EventStore) -> None:
    trace_id = new_id("t")
    batch: list[ev.Event] = [created()]
    batch += [assistant(i, f"m{i}") if i % 2 == 0 else user(i, f"m{i}") for i in range(2, 12)]
    recorded = await store.append("trace", trace_id, batch, expected=Position())
    assert [r.event.n for r in recorded] == list(range(1, 12))
    state = await trace_state(store, trace_id)
    assert state.path == list(range(1, 12))


async def test_snapshot_plus_tail_equals_full_replay(store: EventStore, conn: Connection) -> None:
    snapshots = SnapshotStore(conn)
    trace_id = new_id("t")
    recorded = await store.append("trace", trace_id, [created()], expected=Position())
    position = Position(recorded[-1].seq, 1)
    for seq in range(2, 80):
        factory = assistant if seq % 2 == 0 else user
        [r] = await store.append("trace", trace_id, [factory(seq, f"m{seq}")], expected=position)
        position = Position(r.seq, r.event.n)
        if seq == 60:
            mid = await trace_state(store, trace_id)
            await snapshots.write("trace", trace_id, pack_snapshot(mid))
    snapshot = await snapshots.read("trace", trace_id, TraceState)
    assert snapshot is not None and snapshot.version == 60
    from_snapshot = await traces(store, snapshots=snapshots).load(trace_id)
    scratch = TraceState()
    async for r in store.replay("trace", trace_id):
        scratch.apply(r.event, r.seq)
    assert from_snapshot.version == scratch.version == 79
    assert msgspec.json.encode(from_snapshot) == msgspec.json.encode(scratch)


async def test_large_snapshot_goes_to_object_store(store: EventStore, conn: Connection) -> None:
    trace_id = new_id("t")
    big = os.urandom(400_000).hex()  # incompressible enough to need the object store
    recorded = await store.append(
        "trace", trace_id, [created(big), assistant(2, big)], expected=Position()
    )
    state = await trace_state(store, trace_id)
    snapshots = SnapshotStore(conn)
    await snapshots.write("trace", trace_id, pack_snapshot(state))
    loaded = await snapshots.read("trace", trace_id, type(state))
    assert loaded is not None and loaded.stream_seq == recorded[-1].seq
    assert loaded.messages[2].content == big
    stored = await (await conn.artifacts()).get(f"snapshot/trace/{trace_id}")
    assert stored.data is not None and len(stored.data) > 512 * 1024


async def test_watch_yields_new_events_live(store: EventStore) -> None:
    trace_id = new_id("t")
    [first] = await store.append("trace", trace_id, [created()], expected=Position())
    seen: list[int] = []
    got_two = asyncio.Event()

    async def watcher() -> None:
        async for r in store.watch("trace", trace_id):
            seen.append(r.event.n)
            if len(seen) == 2:
                got_two.set()
                return

    task = asyncio.create_task(watcher())
    await store.append("trace", trace_id, [assistant(2, "live")], expected=Position(first.seq, 1))
    await asyncio.wait_for(got_two.wait(), timeout=10)
    await task
    assert seen == [1, 2]


async def test_replay_10000_events(store: EventStore) -> None:
    trace_id = new_id("t")
    position = Position()
    batch: list[ev.Event] = [created()]
    for seq in range(2, 10_001):
        batch.append(assistant(seq, "a") if seq % 2 == 0 else user(seq, "u"))
    for start in range(0, len(batch), 1000):
        recorded = await store.append(
            "trace", trace_id, batch[start : start + 1000], expected=position
        )
        position = Position(recorded[-1].seq, recorded[-1].event.n)
    count = 0
    async for _ in store.replay("trace", trace_id):
        count += 1
    assert count == 10_000
    state = await trace_state(store, trace_id)
    assert state.last_sequence == 10_000 and len(state.path) == 10_000
    assert state.stream_seq == position.seq


async def test_fold_of_interleaved_aggregates_ends_at_its_own_last_sequence(
    store: EventStore,
) -> None:
    positions = {"t_a": Position(), "t_b": Position()}
    for step in range(1, 6):
        for trace_id in positions:
            event: ev.Event = created() if step == 1 else user(step, f"{trace_id} {step}")
            [r] = await store.append("trace", trace_id, [event], expected=positions[trace_id])
            positions[trace_id] = Position(r.seq, r.event.n)
    for trace_id, position in positions.items():
        state = await trace_state(store, trace_id)
        assert state.stream_seq == position.seq and state.version == 5
        assert state.messages[5].content == f"{trace_id} 5"


async def test_a_malformed_event_is_skipped_by_reads_and_recorded_as_a_fault(
    store: EventStore, conn: Connection
) -> None:
    trace_id = new_id("t")
    await store.append(
        "trace",
        trace_id,
        [ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])],
        expected=Position(),
    )
    ack = await conn.js.publish(conn.names.subject("trace", trace_id, "completed"), b"{broken")
    replayed = [r.event.type async for r in store.replay("trace", trace_id)]
    assert replayed == ["trace_created"]
    state = await trace_state(store, trace_id)
    assert state.status == "running" and state.stream_seq == ack.seq
    [fault] = state.faults
    assert fault.stream_seq == ack.seq and fault.type == "" and "malformed" in fault.error
    assert state.version == 2  # the skipped event still counts: no later append reuses its n


async def test_provisioning_is_idempotent(conn: Connection) -> None:
    await provision(conn.js, conn.names, ProvisionSettings())
    await provision(conn.js, conn.names, ProvisionSettings(checkpoint_ttl_s=3600))
    info = await conn.js.stream_info(f"KV_{conn.names.checkpoints}")
    assert info.config.max_age == 3600
    workspace = await conn.js.stream_info(f"KV_{conn.names.workspace}")
    assert (workspace.config.max_msgs_per_subject or 0) >= 5
    leases = await conn.kv(conn.names.leases)
    await leases.create("trace.x", b"owner", msg_ttl=5)
    assert (await leases.get("trace.x")).value == b"owner"


async def test_a_large_object_reads_back_whole_over_several_pages(conn: Connection) -> None:
    """More chunks than one direct-get page holds, bytes that do not compress."""
    store = await conn.artifacts()
    data = os.urandom(OBJECT_PAGE * 128 * 1024 + 12_345)
    name = f"big/{new_id('o')}"
    await store.put(name, data)
    assert await conn.read_artifact(name) == data


async def test_a_corrupted_object_is_refused_not_returned(conn: Connection) -> None:
    store = await conn.artifacts()
    name = f"small/{new_id('o')}"
    await store.put(name, b"the real bytes")
    info = await store.get_info(name)
    info.digest = "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(b"other").digest()).decode()
    with pytest.raises(DirectGetError, match="digest mismatch"):
        await read_object(conn.nc, conn.names.artifacts, info)


async def test_an_append_begun_in_flight_settles_to_its_record(store: EventStore) -> None:
    trace_id = new_id("t")
    [first] = await store.append("trace", trace_id, [created()], expected=Position())
    in_flight = await store.begin_append(
        "trace", trace_id, [assistant(2, "a")], expected=Position(first.seq, 1), actor="test"
    )
    [event] = in_flight.events
    assert event.n == 2 and event.aggregate_id == trace_id
    [recorded] = await in_flight.settle()
    assert recorded.seq > first.seq and await in_flight.settle() == [recorded]  # settles once
    state = await trace_state(store, trace_id)
    assert state.stream_seq == recorded.seq and state.main_path()[-1].content == "a"


async def test_an_append_begun_after_another_writer_fails_when_it_settles(
    store: EventStore,
) -> None:
    trace_id = new_id("t")
    [first] = await store.append("trace", trace_id, [created()], expected=Position())
    await store.append("trace", trace_id, [user(2, "theirs")], expected=Position(first.seq, 1))
    in_flight = await store.begin_append(
        "trace", trace_id, [assistant(2, "mine")], expected=Position(first.seq, 1)
    )
    with pytest.raises(ConcurrencyError, match="moved past"):
        await in_flight.settle()
    state = await trace_state(store, trace_id)
    assert [m.content for m in state.main_path()] == ["hello", "theirs"]
