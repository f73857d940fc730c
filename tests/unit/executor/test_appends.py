"""One-off appends outside a turn decide from the fold and re-decide after a lost race."""

from __future__ import annotations

from longhaul.core.memory import MemoryStore
from longhaul.core.repository import traces
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.executor.appends import append_while
from longhaul.executor.children import Children, final_summary
from longhaul.executor.metrics import ExecutorMetrics

from tests.support.folds import trace_state

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


async def running(store: MemoryStore, trace_id: str = "t_1") -> TraceState:
    state = await traces(store).create(trace_id, CREATED, actor="test")
    assert state is not None
    return state


def still_running(state: TraceState) -> bool:
    return state.status == "running"


async def test_appends_while_the_condition_holds() -> None:
    store = MemoryStore()
    state = await running(store)
    assert await append_while(
        traces(store), state, ev.StopRequested(reason="r"), still_running, actor="executor"
    )
    assert state.stop_requested and (await trace_state(store, "t_1")).stop_requested


async def test_a_race_that_ends_the_trace_drops_the_append() -> None:
    store = MemoryStore()
    state = await running(store)
    store.interleave("trace", "t_1", ev.Completed(summary="done first"))
    appended = await append_while(
        traces(store), state, ev.StopRequested(reason="r"), still_running, actor="executor"
    )
    assert not appended and state.status == "completed" and not state.stop_requested
    assert store.conflicts == 1


async def test_an_event_the_fold_refuses_is_not_appended() -> None:
    store = MemoryStore()
    state = await running(store)
    refused = ev.SubtraceFinished(child_trace_id="t_unknown", status="completed")
    assert not await append_while(traces(store), state, refused, lambda s: True, actor="executor")
    assert store.appends == 1


async def test_a_child_end_is_reported_once_to_its_parent() -> None:
    store = MemoryStore()
    parent = await running(store, "t_parent")
    spawned = ev.SubtraceSpawned(child_trace_id="t_child", tool_call_id="c1", task="look")
    await traces(store).save("t_parent", parent, lambda s: [spawned], actor="executor")
    child = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content="look")], parent_trace_id="t_parent"
    )
    child_state = await traces(store).create("t_child", child, actor="executor")
    assert child_state is not None
    await traces(store).save(
        "t_child", child_state, lambda s: [ev.Completed(summary="found it")], actor="executor"
    )
    children = Children(
        traces(store), max_concurrent=2, actor="executor", metrics=ExecutorMetrics()
    )
    await children.on_child_final(child_state)
    await children.on_child_final(child_state)  # a redelivered wake-up
    finished = [
        r.event
        async for r in store.replay("trace", "t_parent")
        if isinstance(r.event, ev.SubtraceFinished)
    ]
    assert len(finished) == 1 and finished[0].summary == final_summary(child_state) == "found it"
