"""Bounded delegation through a real executor and server: sub-agents get no ``agent`` /
``evaluate`` unless their preset allows nesting, and nesting stops at the depth limit and at
the per-root descendant limit, with a ``delegation_limit`` tool error."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.config import DelegationConfig, PipelineConfig
from longhaul.domain.state import TraceState

from tests.integration.executor.scripts import write_script
from tests.support.folds import trace_state
from tests.support.stack import InProcessExecutor, create_trace, test_config, wait_for_trace


def tool_errors(state: TraceState) -> list[str | None]:
    return [m.error_code for m in state.main_path() if m.role == "tool"]


async def test_a_delegated_child_is_offered_no_agent_or_evaluate(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    delegate = {"name": "agent", "arguments": {"mode": "delegate", "task": "find it"}}
    model = write_script(
        tmp_path / "one.yaml",
        [{"tool_calls": [delegate]}, {"content": "done"}],
    )
    async with InProcessExecutor(nats_url, namespace):
        root_id = await create_trace(store, "delegate", model=model)
        root = await wait_for_trace(store, root_id, within=60)
    assert root.status == "completed", root.error
    [child_id] = root.subtraces
    child = await trace_state(store, child_id)
    assert child.depth == 1 and child.config.preset == "default"
    assert root.context is not None and {"agent", "evaluate"} <= set(root.context.tools)
    assert child.context is not None and "bash" in child.context.tools
    assert not {"agent", "evaluate"} & set(child.context.tools)


async def test_a_nesting_preset_delegates_down_to_the_depth_limit_and_no_further(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    # Every level runs turn 0 (delegate to a "manager") and then answers with turn 1.
    delegate = {"name": "agent", "arguments": {"task": "dig deeper", "preset": "manager"}}
    model = write_script(
        tmp_path / "deep.yaml", [{"tool_calls": [delegate]}, {"content": "finished"}]
    )
    config = test_config(nats_url, namespace, presets={"manager": {"allow_nesting": True}})
    async with InProcessExecutor(nats_url, namespace, config=config):
        root_id = await create_trace(store, "dig", model=model, preset="manager")
        root = await wait_for_trace(store, root_id, within=60)
    assert root.status == "completed", root.error
    [child_id] = root.subtraces
    child = await trace_state(store, child_id)
    [grandchild_id] = child.subtraces
    grandchild = await trace_state(store, grandchild_id)
    assert (child.depth, grandchild.depth) == (1, 2)
    assert tool_errors(grandchild) == ["delegation_limit"]  # depth 2 may not delegate
    refusal = next(m for m in grandchild.main_path() if m.role == "tool")
    assert "nest at most 2 deep" in str(refusal.content)
    assert grandchild.status == "completed" and grandchild.subtraces == {}
    assert root.descendants == 2  # the child reported its grandchild when it finished


async def test_a_root_cannot_have_more_descendants_than_the_limit(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    explore = {"name": "agent", "arguments": {"mode": "explore", "tasks": ["a", "b", "c"]}}
    two = {"name": "agent", "arguments": {"mode": "explore", "tasks": ["a", "b"]}}
    # Children answer with turn 0; the root starts with one assistant message.
    model = write_script(
        tmp_path / "many.yaml",
        [
            {"content": "child finding"},
            {"tool_calls": [explore]},
            {"tool_calls": [two]},
            {"content": "root done"},
        ],
    )
    pipeline = PipelineConfig(delegation=DelegationConfig(max_descendants=4))
    config = test_config(nats_url, namespace, pipeline=pipeline)
    async with InProcessExecutor(nats_url, namespace, config=config):
        root_id = await create_trace(
            store,
            [
                ev.InputMessage(role="user", content="get ready"),
                ev.InputMessage(role="assistant", content="ready"),
                ev.InputMessage(role="user", content="explore"),
            ],
            model=model,
        )
        root = await wait_for_trace(store, root_id, within=60)
    assert root.status == "completed", root.error
    assert len(root.subtraces) == 3  # 3 fit; 3 + 2 would be 5 > 4
    assert tool_errors(root) == [None, "delegation_limit"]
    refusal = [m for m in root.main_path() if m.role == "tool"][-1]
    assert "limit of 4 sub-traces per root (1 left here)" in str(refusal.content)
