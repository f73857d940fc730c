"""Sub-trace bookkeeping against a real store (no executor running): creation under the
per-parent limit, idempotent results on the parent, queued children starting as others end."""

from __future__ import annotations

from longhaul.core.repository import traces
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.executor.children import Children
from longhaul.executor.metrics import ExecutorMetrics

from tests.support.folds import trace_state
from tests.support.stack import append_to, create_trace


async def spawn(store: EventStore, parent: str, count: int, mode: str = "delegate") -> list[str]:
    children = [new_id("t") for _ in range(count)]
    for n, child in enumerate(children):
        await append_to(
            store,
            parent,
            ev.SubtraceSpawned(
                child_trace_id=child,
                tool_call_id=f"call_{n}",
                mode=mode,  # type: ignore[arg-type]
                task=f"task {n}",
                preset="explore" if mode == "explore" else "default",
            ),
        )
    return children


async def finish(store: EventStore, trace_id: str, summary: str) -> None:
    await append_to(store, trace_id, ev.Completed(summary=summary))


async def test_children_start_up_to_the_limit_then_as_others_finish(store: EventStore) -> None:
    parent = await create_trace(store, "parent", model="scripted:auto")
    ids = await spawn(store, parent, 5)
    children = Children(traces(store), max_concurrent=2, actor="test", metrics=ExecutorMetrics())

    started = await children.start_queued(await trace_state(store, parent))
    assert started == ids[:2]
    assert await children.start_queued(await trace_state(store, parent)) == []  # idempotent

    first = await trace_state(store, ids[0])
    assert first.parent_trace_id == parent and first.parent_tool_call_id == "call_0"
    assert [m.content for m in first.main_path()] == ["task 0"]

    await finish(store, ids[0], "found it")
    await children.on_child_final(await trace_state(store, ids[0]))
    await children.on_child_final(await trace_state(store, ids[0]))  # a redelivered wake-up

    state = await trace_state(store, parent)
    assert state.subtraces[ids[0]].status == "completed"
    assert state.subtraces[ids[0]].summary == "found it"
    finished = [
        e async for e in store.replay("trace", parent) if isinstance(e.event, ev.SubtraceFinished)
    ]
    assert len(finished) == 1
    assert (await trace_state(store, ids[2])).exists  # the first queued child took the slot
    assert not (await trace_state(store, ids[3])).exists


async def test_explore_children_are_read_only(store: EventStore) -> None:
    parent = await create_trace(store, "parent", model="scripted:auto")
    [child] = await spawn(store, parent, 1, mode="explore")
    children = Children(traces(store), max_concurrent=3, actor="test", metrics=ExecutorMetrics())
    await children.start_queued(await trace_state(store, parent))
    state = await trace_state(store, child)
    assert state.config.read_only and state.config.preset == "explore"
    assert state.config.model == "scripted:auto"


async def test_a_finished_parent_stops_its_running_children(store: EventStore) -> None:
    parent = await create_trace(store, "parent", model="scripted:auto")
    ids = await spawn(store, parent, 2)
    children = Children(traces(store), max_concurrent=3, actor="test", metrics=ExecutorMetrics())
    await children.start_queued(await trace_state(store, parent))
    await append_to(store, parent, ev.Failed(error="boom"))
    await children.stop_children(await trace_state(store, parent), reason="parent failed")
    for child in ids:
        assert (await trace_state(store, child)).stop_requested


async def test_continuing_a_finished_child_runs_it_again_with_the_new_task(
    store: EventStore,
) -> None:
    parent = await create_trace(store, "parent", model="scripted:auto")
    [child] = await spawn(store, parent, 1)
    children = Children(traces(store), max_concurrent=3, actor="test", metrics=ExecutorMetrics())
    await children.start_queued(await trace_state(store, parent))
    await finish(store, child, "first answer")
    await children.on_child_final(await trace_state(store, child))
    await append_to(
        store,
        parent,
        ev.SubtraceSpawned(
            child_trace_id=child,
            tool_call_id="call_9",
            task="follow-up",
            continue_from=child,
        ),
    )
    assert await children.start_queued(await trace_state(store, parent)) == [child]
    assert await children.start_queued(await trace_state(store, parent)) == []  # running again
    state = await trace_state(store, child)
    assert state.status == "running" and state.runs == 2
    assert state.main_path()[-1].content == "follow-up"
