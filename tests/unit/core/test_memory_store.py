"""The in-memory store keeps the event store's rules: expected positions, Msg-Id
de-duplication, replay and watch by stream sequence."""

from __future__ import annotations

import asyncio

import pytest
from longhaul.core.memory import MemoryStore
from longhaul.core.store import ConcurrencyError, Position
from longhaul.domain import events as ev

from tests.support.folds import trace_state

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


def message(sequence: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence, parent_sequence=sequence - 1, role="assistant", content=text
    )


async def test_appends_only_at_the_expected_position() -> None:
    store = MemoryStore()
    [first] = await store.append("trace", "t_1", [CREATED], expected=Position(), actor="a")
    assert first.event.aggregate_id == "t_1" and first.event.n == 1 and first.event.actor == "a"
    with pytest.raises(ConcurrencyError):
        await store.append("trace", "t_1", [message(2, "x")], expected=Position())
    [second] = await store.append(
        "trace", "t_1", [message(2, "x")], expected=Position(first.seq, 1)
    )
    assert second.seq > first.seq and store.conflicts == 1


async def test_a_retried_publish_is_deduplicated_but_a_different_event_n_conflicts() -> None:
    store = MemoryStore()
    [first] = await store.append("trace", "t_1", [CREATED], expected=Position())
    [again] = await store.append("trace", "t_1", [first.event], expected=Position())
    assert again.seq == first.seq and store.appends == 1
    with pytest.raises(ConcurrencyError):
        other = ev.TraceCreated(messages=[], name="other")
        await store.append("trace", "t_1", [other], expected=Position())


async def test_replay_and_catch_up_by_stream_sequence_per_aggregate() -> None:
    store = MemoryStore()
    [a] = await store.append("trace", "t_a", [CREATED], expected=Position())
    await store.append("trace", "t_b", [CREATED], expected=Position())
    await store.append("trace", "t_a", [message(2, "x")], expected=Position(a.seq, 1))
    replayed = [r.event.type async for r in store.replay("trace", "t_a")]
    assert replayed == ["trace_created", "message_appended"]
    assert [r.event.n async for r in store.replay("trace", "t_a", after=a.seq)] == [2]
    state = await trace_state(store, "t_a")
    assert state.version == 2 and (await store.last_position("trace", "t_a")).n == 2


async def test_watch_yields_the_past_then_live_events() -> None:
    store = MemoryStore()
    [a] = await store.append("trace", "t_1", [CREATED], expected=Position())
    seen: list[int] = []

    async def follow() -> None:
        async for recorded in store.watch("trace", "t_1"):
            seen.append(recorded.event.n)
            if recorded.event.n == 2:
                return

    watcher = asyncio.create_task(follow())
    await store.append("trace", "t_1", [message(2, "live")], expected=Position(a.seq, 1))
    await asyncio.wait_for(watcher, 5)
    assert seen == [1, 2]


async def test_interleaved_writes_land_first_and_make_the_next_append_conflict() -> None:
    store = MemoryStore()
    [a] = await store.append("trace", "t_1", [CREATED], expected=Position())
    store.interleave("trace", "t_1", ev.StopRequested(reason="user"))
    with pytest.raises(ConcurrencyError):
        await store.append("trace", "t_1", [message(2, "late")], expected=Position(a.seq, 1))
    state = await trace_state(store, "t_1")
    assert state.stop_requested and state.version == 2
