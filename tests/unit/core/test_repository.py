"""The repository over the in-memory store: checked appends at the fold's position,
re-decided on conflict, bounded retries, creation, cached loads."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from longhaul.core.memory import MemorySnapshots, MemoryStore
from longhaul.core.repository import ONCE, RetryPolicy, tasks, traces
from longhaul.core.snapshots import Snapshots, pack_snapshot
from longhaul.core.store import ConcurrencyError
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState

from tests.support.folds import trace_state

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])
FAST = RetryPolicy(attempts=3, base_s=0.0, cap_s=0.0)


def message(sequence: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence, parent_sequence=sequence - 1, role="assistant", content=text
    )


async def created(store: MemoryStore, trace_id: str = "t_1") -> TraceState:
    state = await traces(store).create(trace_id, CREATED, actor="test")
    assert state is not None
    return state


async def test_save_appends_at_the_fold_position_and_applies() -> None:
    store = MemoryStore()
    state = await created(store)
    [recorded] = await traces(store).save("t_1", state, lambda s: [message(2, "a")], actor="x")
    assert recorded.event.n == 2 and recorded.event.actor == "x"
    assert state.version == 2 and state.stream_seq == recorded.seq
    assert state.messages[2].content == "a"
    assert (await trace_state(store, "t_1")).last_sequence == 2


async def test_an_event_the_fold_refuses_never_reaches_the_log() -> None:
    store = MemoryStore()
    state = await created(store)
    with pytest.raises(InvalidTransition):
        await traces(store).save("t_1", state, lambda s: [message(5, "gap")], actor="x")
    with pytest.raises(InvalidTransition):
        await traces(store).save("t_1", state, lambda s: [ev.HumanReplied(content="?")], actor="x")
    assert store.appends == 1 and state.version == 1


async def test_a_lost_race_catches_up_and_decides_again() -> None:
    store = MemoryStore()
    state = await created(store)
    store.interleave("trace", "t_1", message(2, "from another writer"))
    decided: list[int] = []
    conflicts: list[int] = []

    def decide(current: TraceState) -> list[ev.Event]:
        decided.append(current.last_sequence)
        return [message(current.last_sequence + 1, "mine")]

    [recorded] = await traces(store).save(
        "t_1",
        state,
        decide,
        actor="x",
        retry=FAST,
        on_conflict=lambda s: conflicts.append(s.version),
    )
    assert decided == [1, 2] and conflicts == [1]
    assert recorded.event.n == 3 and state.messages[2].content == "from another writer"
    assert [m.content for m in state.main_path()][1:] == ["from another writer", "mine"]


async def test_a_decision_that_no_longer_applies_after_the_race_is_dropped() -> None:
    store = MemoryStore()
    state = await created(store)
    store.interleave("trace", "t_1", ev.Completed(summary="someone else finished"))
    written = await traces(store).save(
        "t_1",
        state,
        lambda s: [ev.StopRequested()] if s.status == "running" else [],
        actor="x",
        retry=FAST,
    )
    assert written == [] and state.status == "completed"


async def test_conflicts_past_the_policy_are_the_callers() -> None:
    store = MemoryStore()
    state = await created(store)

    def decide(current: TraceState) -> list[ev.Event]:
        # every attempt loses to another writer appending first
        store.interleave("trace", "t_1", ev.LoopWarned(tool="bash", message="again"))
        return [ev.LoopWarned(tool="bash", message="mine")]

    with pytest.raises(ConcurrencyError):
        await traces(store).save("t_1", state, decide, actor="x", retry=FAST)
    assert store.conflicts == 3 and state.pending_warnings == ["again", "again"]


async def test_once_gives_the_first_conflict_back() -> None:
    store = MemoryStore()
    state = await created(store)
    store.interleave("trace", "t_1", ev.LoopWarned(tool="bash", message="other"))
    with pytest.raises(ConcurrencyError):
        await traces(store).save(
            "t_1", state, lambda s: [ev.LoopWarned(tool="bash", message="m")], actor="x", retry=ONCE
        )
    assert state.version == 1  # nothing applied that is not on the log


async def test_creating_twice_is_a_no_op() -> None:
    store = MemoryStore()
    assert await traces(store).create("t_1", CREATED, actor="a") is not None
    assert await traces(store).create("t_1", CREATED, actor="b") is None
    assert store.appends == 1


async def test_a_cached_load_reads_only_new_events() -> None:
    store = MemoryStore()
    repo = tasks(store, cache_size=2)
    await repo.create("task_1", ev.TaskCreated(goal="g"), actor="x")
    first = await repo.load("task_1")
    await store.append(
        "task",
        "task_1",
        [ev.TaskFailed(error="boom")],
        expected=await store.last_position("task", "task_1"),
    )
    again = await repo.load("task_1")
    assert again is first and again.status == "failed"
    repo.forget("task_1")
    assert await repo.load("task_1") is not first
    missing = await repo.load("task_nope")
    assert not missing.exists


async def test_a_cached_fold_of_an_aggregate_created_again_is_dropped() -> None:
    """An erased trace whose id is used again (a keyed id, once its tombstone is gone): the
    caller names the new creation's place and the old fold is not caught up on top of it."""
    store = MemoryStore()
    repo = traces(store, cache_size=2)
    await created(store)
    old = await repo.load("t_1")
    store.erase("trace", "t_1")
    again = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="again")])
    assert await traces(store).create("t_1", again, actor="test") is not None
    first = await repo.first("t_1")
    assert first is not None and not isinstance(first, ev.Unreadable)
    state = await repo.load("t_1", origin=first.seq)
    assert state is not old and state.faults == []
    assert [m.content for m in state.messages.values()] == ["again"]


async def test_load_starts_from_a_snapshot() -> None:
    store = MemoryStore()
    state = await created(store)
    await traces(store).save("t_1", state, lambda s: [message(2, "a")], actor="x")
    snapshot = TraceState(
        trace_id="t_1",
        status="running",
        version=2,
        stream_seq=state.stream_seq,
        name="from snapshot",
    )
    snapshots = MemorySnapshots()
    await snapshots.write("trace", "t_1", pack_snapshot(snapshot))
    loaded = await traces(store, snapshots=snapshots).load("t_1")
    assert loaded.name == "from snapshot" and loaded.version == 2


def test_a_pause_is_jittered_and_capped() -> None:
    policy = RetryPolicy(attempts=8, base_s=0.005, cap_s=0.1)
    pauses = [policy.pause(k) for k in range(8) for _ in range(50)]
    assert all(0 <= p <= 0.1 for p in pauses) and len(set(pauses)) > 100
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


async def test_a_save_starts_a_snapshot_when_one_is_due() -> None:
    store, stored = MemoryStore(), MemorySnapshots()
    snapshots = Snapshots(stored, every=3)
    repo = traces(store, snapshots=stored).taking_snapshots(snapshots)
    state = await created(store)
    await repo.save("t_1", state, lambda s: [message(2, "a")], actor="x")
    await snapshots.flush(5)
    assert await stored.read("trace", "t_1", TraceState) is None  # version 2: not due
    await repo.save("t_1", state, lambda s: [message(3, "b")], actor="x")
    await snapshots.flush(5)
    snapshot = await stored.read("trace", "t_1", TraceState)
    assert snapshot is not None and snapshot.version == 3
    assert (await repo.load("t_1")).main_path()[-1].content == "b"


def appending(sequence: int) -> Callable[[TraceState], list[ev.Event]]:
    return lambda _state: [message(sequence, f"m{sequence}")]


async def test_a_long_run_of_saves_is_snapshotted_at_rest() -> None:
    """On a long log the schedule leaves up to ~1/4 of it behind the last snapshot; once the
    writer is at rest, ``every`` events or more since its last snapshot are snapshotted, so
    the next load replays none. Fewer are left to the schedule."""
    store, stored = MemoryStore(), MemorySnapshots()
    snapshots = Snapshots(stored, every=3)
    repo = traces(store, snapshots=stored).taking_snapshots(snapshots)
    state = await created(store)
    for sequence in range(2, 41):
        await repo.save("t_1", state, appending(sequence), actor="x")
    await snapshots.flush(5)
    scheduled = await stored.read("trace", "t_1", TraceState)
    assert scheduled is not None and state.version - scheduled.version >= 3
    await snapshots.at_rest("trace", "t_1", state, 5)
    await snapshots.flush(5)
    rested = await stored.read("trace", "t_1", TraceState)
    assert rested is not None and rested.version == state.version == 40
    assert rested.stream_seq == state.stream_seq
    # two more events: under ``every`` since the last snapshot, left to the schedule
    for sequence in (41, 42):
        await repo.save("t_1", state, appending(sequence), actor="x")
    await snapshots.at_rest("trace", "t_1", state, 5)
    await snapshots.flush(5)
    kept = await stored.read("trace", "t_1", TraceState)
    assert kept is not None and kept.version == 40
