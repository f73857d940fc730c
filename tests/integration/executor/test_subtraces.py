"""A parent with five children on two executor processes: children are created under the
per-parent limit, run wherever a replica is free, and wake the parent with their summaries."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore
from longhaul.domain import events as ev

from tests.integration.executor.scripts import write_script
from tests.support.stack import create_trace, executor_processes, wait_for_trace

LIMIT = 2


async def test_a_parent_with_five_children_across_two_executors(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    tasks = [f"question {n}" for n in range(5)]
    # Turn N answers the request holding N assistant messages: children (no assistant message
    # yet) answer with turn 0; the parent starts with one assistant message, so it explores.
    model = write_script(
        tmp_path / "tree.yaml",
        [
            {"content": "child finding"},
            {"tool_calls": [{"name": "agent", "arguments": {"mode": "explore", "tasks": tasks}}]},
            {"content": "parent done"},
        ],
    )
    env = {"LONGHAUL_PIPELINE__MAX_CONCURRENT_SUBTRACES": str(LIMIT)}
    async with executor_processes(nats_url, namespace, 2, env=env) as procs:
        parent = await create_trace(
            store,
            [
                ev.InputMessage(role="user", content="get ready"),
                ev.InputMessage(role="assistant", content="ready"),
                ev.InputMessage(role="user", content="explore five questions"),
            ],
            model=model,
        )
        state = await wait_for_trace(store, parent, within=60)
        assert all(p.running for p in procs)
    assert state.status == "completed", state.error
    assert len(state.subtraces) == 5
    assert all(info.status == "completed" for info in state.subtraces.values())
    [report] = [m for m in state.main_path() if m.role == "tool"]
    assert isinstance(report.content, str)
    assert report.content.count("child finding") == 5

    spans: list[tuple[float, float]] = []
    for child_id, info in state.subtraces.items():
        child = await store.load_trace(child_id)
        assert child.parent_trace_id == parent and child.parent_tool_call_id == info.tool_call_id
        assert child.config.read_only and child.config.preset == "explore"
        assert child.main_path()[0].content == info.task
        events = [r.event async for r in store.replay("trace", child_id)]
        spans.append((events[0].ts, events[-1].ts))
    assert sorted(info.task for info in state.subtraces.values()) == tasks
    # Never more than LIMIT children alive at once: a child is created only after an earlier
    # one's end was recorded on the parent.
    for start, _ in spans:
        alive = sum(1 for s, e in spans if s <= start < e)
        assert alive <= LIMIT
