"""The executor's sink over the in-memory store: every event checked before it is appended,
re-appended after a race it survives, the turn ended (stale) after a race it does not, and
snapshots taken as the log grows."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from longhaul.agent.contract import StaleState
from longhaul.core.connection import Connection
from longhaul.core.index import TraceIndex
from longhaul.core.memory import MemorySnapshots, MemoryStore
from longhaul.core.repository import traces
from longhaul.core.snapshots import Snapshots
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState
from longhaul.executor.background_writes import TurnBackgroundWrites
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.sink import TraceSink

from tests.support.folds import trace_state

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


class Held:
    def __init__(self) -> None:
        self.lost = asyncio.Event()


async def sink_on(
    store: MemoryStore,
    lease: Held | None = None,
    *,
    snapshots: MemorySnapshots | None = None,
    snapshot_every: int = 200,
) -> TraceSink:
    repository = traces(store, snapshots=snapshots)
    state = await repository.create("t_1", CREATED, actor="test")
    assert state is not None
    # The index is written only every interval_s; an infinite one keeps it (and NATS) out.
    background_writes = TurnBackgroundWrites(
        Snapshots(snapshots or MemorySnapshots(), snapshot_every),
        TraceIndex(cast(Connection, None)),
        interval_s=float("inf"),
    )
    return TraceSink(
        repository,
        state,
        actor="executor",
        lease=lease or Held(),
        metrics=ExecutorMetrics(),
        background_writes=background_writes,
    )


def message(state: TraceState, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=state.last_sequence + 1,
        parent_sequence=state.head_sequence,
        role="assistant",
        content=text,
    )


def conflicts(sink: TraceSink, outcome: str) -> float:
    value = sink.metrics.registry.get_sample_value(
        "longhaul_executor_conflicts_total", {"outcome": outcome}
    )
    return value or 0.0


async def test_events_are_appended_in_order_and_applied() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    await sink.emit([message(sink.state, "a")])
    await sink.emit([message(sink.state, "b"), ev.Completed(summary="b")])
    assert sink.appended == 3 and sink.state.status == "completed"
    stored = await trace_state(store, "t_1")
    assert [m.content for m in stored.main_path()] == ["hi", "a", "b"]
    written = [r.event async for r in store.replay("trace", "t_1") if r.event.n > 1]
    assert [e.actor for e in written] == ["executor"] * 3


async def test_an_event_the_fold_refuses_never_reaches_the_log() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    with pytest.raises(InvalidTransition):
        await sink.emit([ev.HumanReplied(content="nobody asked")])
    with pytest.raises(InvalidTransition):
        await sink.emit([ev.Waiting(reason="subtraces")])  # no child would ever wake it
    assert store.appends == 1


async def test_a_race_the_event_survives_re_appends_it() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    store.interleave("trace", "t_1", ev.StopRequested(reason="user"))
    await sink.emit([message(sink.state, "still fine")])
    assert sink.state.stop_requested and sink.state.messages[2].content == "still fine"
    assert conflicts(sink, "reappended") == 1 and conflicts(sink, "stale") == 0


async def test_a_race_the_event_does_not_survive_ends_the_turn_as_stale() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    store.interleave("trace", "t_1", ev.Stopped(reason="user"))
    with pytest.raises(StaleState):
        await sink.emit([message(sink.state, "too late")])
    assert conflicts(sink, "stale") == 1
    assert (await trace_state(store, "t_1")).last_sequence == 1


async def test_a_lost_lease_ends_the_turn_before_anything_is_written() -> None:
    store = MemoryStore()
    lease = Held()
    sink = await sink_on(store, lease)
    lease.lost.set()
    with pytest.raises(StaleState):
        await sink.emit([message(sink.state, "not mine any more")])
    assert store.appends == 1


async def test_snapshots_are_taken_as_the_log_grows() -> None:
    store, snapshots = MemoryStore(), MemorySnapshots()
    sink = await sink_on(store, snapshots=snapshots, snapshot_every=5)
    for n in range(12):
        await sink.emit([message(sink.state, f"m{n}")])
    await asyncio.sleep(0)  # let the background snapshot task run
    snapshot = await snapshots.read("trace", "t_1", TraceState)
    # taken in the background from the live state: at least the 5th event, and consistent
    assert snapshot is not None and snapshot.version >= 5
    assert snapshot.last_sequence == snapshot.version and snapshot.stream_seq > 0


# ---------------------------------------------------------------- write-behind (emit_behind)


async def test_a_write_behind_event_is_settled_before_the_next_append() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    await sink.emit_behind([message(sink.state, "a")])
    # applied at once; its position is taken when it settles
    assert sink.state.messages[2].content == "a" and sink.appended == 0
    await sink.emit([message(sink.state, "b")])
    assert sink.appended == 2
    stored = await trace_state(store, "t_1")
    assert [m.content for m in stored.main_path()] == ["hi", "a", "b"]
    assert sink.state.stream_seq == stored.stream_seq and sink.state.version == stored.version


async def test_a_write_behind_race_the_event_survives_re_appends_it_and_ends_the_turn() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    store.interleave("trace", "t_1", ev.StopRequested(reason="user"))
    await sink.emit_behind([message(sink.state, "tool result")])
    # the turn's state holds the event where the log does not: it cannot go on from there
    with pytest.raises(StaleState, match="appended again"):
        await sink.settle()
    written = [r.event async for r in store.replay("trace", "t_1")]
    assert [e.type for e in written] == ["trace_created", "stop_requested", "message_appended"]
    assert conflicts(sink, "reappended") == 1 and conflicts(sink, "stale") == 0
    stored = await trace_state(store, "t_1")
    assert stored.stop_requested and stored.messages[2].content == "tool result"
    assert stored.faults == []


async def test_a_write_behind_race_the_event_does_not_survive_ends_the_turn_unwritten() -> None:
    store = MemoryStore()
    sink = await sink_on(store)
    store.interleave("trace", "t_1", ev.Stopped(reason="user"))
    await sink.emit_behind([message(sink.state, "too late")])
    with pytest.raises(StaleState, match="no longer applies"):
        await sink.emit([message(sink.state, "never written")])
    assert conflicts(sink, "stale") == 1
    stored = await trace_state(store, "t_1")
    assert stored.status == "stopped" and stored.last_sequence == 1


async def test_a_snapshot_due_before_a_write_behind_event_matches_the_log() -> None:
    store, snapshots = MemoryStore(), MemorySnapshots()
    sink = await sink_on(store, snapshots=snapshots, snapshot_every=2)
    await sink.emit([message(sink.state, "a")])  # the 2nd event: a snapshot is due
    await sink.emit_behind([message(sink.state, "b")])  # applied before the snapshot task runs
    await asyncio.sleep(0)  # the background snapshot task runs now
    await sink.settle()
    snapshot = await snapshots.read("trace", "t_1", TraceState)
    assert snapshot is not None and (snapshot.version, snapshot.last_sequence) == (2, 2)
    loaded = await traces(store, snapshots=snapshots).load("t_1")  # snapshot + catch-up
    assert loaded.faults == [] and [m.content for m in loaded.main_path()] == ["hi", "a", "b"]


def answer(state: TraceState, text: str) -> ev.MessageAppended:
    """A tool's answer to the head message."""
    return ev.MessageAppended(
        sequence=state.last_sequence + 1,
        parent_sequence=state.head_sequence,
        role="tool",
        tool_call_id="c1",
        content=text,
    )


async def test_a_held_message_goes_with_its_result_in_one_batch() -> None:
    """A step whose calls are all read_only: its message is applied at once and sent with the
    first result, one atomic batch and one round trip."""
    store = MemoryStore(atomic=True)
    sink = await sink_on(store)
    await sink.hold([message(sink.state, "calling")])
    assert sink.state.messages[2].content == "calling" and store.appends == 1  # not sent
    before = store.round_trips
    await sink.emit_behind([answer(sink.state, "result")])
    await sink.settle()
    assert store.round_trips == before + 1 and sink.appended == 2
    stored = await trace_state(store, "t_1")
    assert [m.content for m in stored.main_path()] == ["hi", "calling", "result"]
    assert sink.state.stream_seq == stored.stream_seq


async def test_a_batch_that_loses_a_race_is_appended_again_after_the_other_writer() -> None:
    store = MemoryStore(atomic=True)
    sink = await sink_on(store)
    await sink.hold([message(sink.state, "calling")])
    store.interleave("trace", "t_1", ev.StopRequested(reason="user"))
    await sink.emit_behind([answer(sink.state, "result")])
    with pytest.raises(StaleState):
        await sink.settle()
    stored = await trace_state(store, "t_1")
    assert stored.stop_requested
    assert [m.content for m in stored.main_path()] == ["hi", "calling", "result"]
    assert (sink.state.version, sink.state.stream_seq) == (stored.version, stored.stream_seq)
    assert conflicts(sink, "reappended") == 1


async def test_without_atomic_batches_a_step_is_appended_one_by_one() -> None:
    store = MemoryStore(atomic=False)
    sink = await sink_on(store)
    before = store.round_trips
    await sink.hold([message(sink.state, "calling")])  # in flight at once, as before
    await sink.emit_behind([answer(sink.state, "result")])
    await sink.settle()
    await sink.emit([message(sink.state, "done"), ev.Completed(summary="done")])
    assert store.round_trips == before + 4
    stored = await trace_state(store, "t_1")
    assert [m.content for m in stored.main_path()] == ["hi", "calling", "result", "done"]
    assert stored.status == "completed"
