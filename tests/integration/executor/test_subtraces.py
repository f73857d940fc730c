"""A parent with five children on two executor processes: children are created under the
per-parent limit, run wherever a replica is free, and wake the parent with their summaries."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

from tests.integration.executor.scripts import write_script
from tests.support.folds import trace_state
from tests.support.stack import (
    InProcessExecutor,
    create_trace,
    executor_processes,
    wait_for_trace,
)

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
        child = await trace_state(store, child_id)
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


async def test_a_keyed_trace_and_its_sub_traces_share_one_directory_in_the_key_s(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    # Children answer turns 0-1 (write, report); the parent starts with two assistant
    # messages, so it delegates (turn 2), reads what the child wrote (3) and answers (4).
    write = {"name": "write", "arguments": {"path": "from-child.txt", "content": "CHILD-WROTE"}}
    model = write_script(
        tmp_path / "share.yaml",
        [
            {"tool_calls": [write]},
            {"content": "child wrote it"},
            {
                "tool_calls": [
                    {"name": "agent", "arguments": {"mode": "delegate", "task": "write it"}}
                ]
            },
            {"tool_calls": [{"name": "read", "arguments": {"path": "from-child.txt"}}]},
            {"content": "parent done"},
        ],
    )
    turns = [
        ev.InputMessage(role="user", content="a"),
        ev.InputMessage(role="assistant", content="b"),
        ev.InputMessage(role="user", content="c"),
        ev.InputMessage(role="assistant", content="d"),
        ev.InputMessage(role="user", content="go"),
    ]
    parent = new_id("t")
    await store.append(
        "trace",
        parent,
        [
            ev.TraceCreated(
                messages=turns,
                config=ev.TraceConfig(model=model),
                owner="k_share",
            )
        ],
        expected=Position(),
    )
    async with InProcessExecutor(nats_url, namespace, settings={"working_root": work}):
        state = await wait_for_trace(store, parent, within=60)
    assert state.status == "completed", state.error
    (child_id,) = state.subtraces
    child = await trace_state(store, child_id)
    assert child.owner == "k_share" and child.root_trace_id == parent
    assert (work / "keys" / "k_share" / parent / "from-child.txt").read_text() == "CHILD-WROTE"
    read = [m for m in state.main_path() if m.role == "tool"][-1]
    assert "CHILD-WROTE" in str(read.content)


async def test_a_sub_agent_never_regains_a_tool_the_client_took_away(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    """The client allows only ``read`` and ``agent``; the model delegates to the ``default``
    preset (which has ``bash``) and the child calls ``bash``: it is not offered, and nothing
    runs."""
    work = tmp_path / "work"
    model = write_script(
        tmp_path / "escalate.yaml",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "touch pwned"}}]},
            {"content": "child done"},
            {
                "tool_calls": [
                    {"name": "agent", "arguments": {"task": "run it", "preset": "default"}}
                ]
            },
            {"content": "parent done"},
        ],
    )
    async with InProcessExecutor(nats_url, namespace, settings={"working_root": work}):
        parent = await create_trace(
            store,
            [
                ev.InputMessage(role="user", content="get ready"),
                ev.InputMessage(role="assistant", content="ready"),
                ev.InputMessage(role="user", content="ready?"),
                ev.InputMessage(role="assistant", content="yes"),
                ev.InputMessage(role="user", content="delegate"),
            ],
            model=model,
            tools=["read", "agent"],
        )
        state = await wait_for_trace(store, parent, within=60)
    assert state.status == "completed", state.error
    [child_id] = state.subtraces
    child = await trace_state(store, child_id)
    assert child.context is not None and child.config.preset == "default"
    assert "bash" not in child.context.tools and "read" in child.context.tools
    [refused] = [m for m in child.main_path() if m.role == "tool"]
    assert refused.error_code is not None and "bash" in str(refused.content)
    assert not list(work.rglob("pwned"))
