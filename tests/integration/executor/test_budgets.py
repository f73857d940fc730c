"""Budgets per run (``max_iterations`` / ``max_tokens``) through a real executor and server:
counted from the log over the whole run, not per executor turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState

from tests.integration.executor.scripts import record_steps, write_script
from tests.support.folds import trace_state
from tests.support.stack import (
    InProcessExecutor,
    append_to,
    create_trace,
    wait_for_trace,
    waiting,
)

TOOLS = {"tool_modules": ["tests.integration.executor.tooling"]}


def model_calls(state: TraceState) -> int:
    """Assistant messages the model produced (every one a model call), on any branch."""
    return sum(1 for m in state.all_messages() if m.role == "assistant" and not m.synthetic)


async def stopped_event(store: EventStore, trace_id: str) -> ev.Stopped:
    events = [r.event async for r in store.replay("trace", trace_id)]
    return [e for e in events if isinstance(e, ev.Stopped)][-1]


async def test_an_ask_human_wait_does_not_reset_the_iteration_budget(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    record = [
        {"tool_calls": [{"name": "record", "arguments": {"step": n, "log": str(log)}}]}
        for n in range(6)
    ]
    ask = {"tool_calls": [{"name": "ask_human", "arguments": {"question": "go on?"}}]}
    model = write_script(
        tmp_path / "ask.yaml", [record[0], record[1], ask, *record[2:], {"content": "done"}]
    )
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        trace_id = await create_trace(store, "work, ask, work", model=model, max_iterations=4)
        asked = await wait_for_trace(store, trace_id, waiting)
        assert asked.wait_reason == "human" and asked.run_usage.iterations == 3
        await append_to(store, trace_id, ev.HumanReplied(content="yes"))
        state = await wait_for_trace(store, trace_id)
    assert state.status == "stopped" and state.stop_reason == "max_iterations"
    assert model_calls(state) == 4  # 3 before the wait + 1 after it, not 3 + a fresh 4
    stopped = await stopped_event(store, trace_id)
    assert stopped.used is not None and stopped.used.iterations == 4
    assert state.unanswered_tool_calls() == []  # the last call was answered before the stop


async def test_continue_starts_a_new_budget(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "steps.yaml", 20, tmp_path / "calls.jsonl")
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        trace_id = await create_trace(store, "many steps", model=model, max_iterations=3)
        first = await wait_for_trace(store, trace_id)
        assert first.stop_reason == "max_iterations" and model_calls(first) == 3
        await append_to(
            store, trace_id, ev.RunRequested(messages=[ev.InputMessage(role="user", content="go")])
        )
        state = await wait_for_trace(store, trace_id, lambda s: s.runs == 2 and s.is_final)
    assert state.status == "stopped" and state.stop_reason == "max_iterations"
    assert model_calls(state) == 6 and state.run_usage.iterations == 3


def turn(usage: tuple[int, int], **fields: Any) -> dict[str, Any]:
    return {**fields, "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}


async def test_a_childs_tokens_count_against_the_roots_max_tokens(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    # Children (no assistant message yet) answer with turn 0 for 600 tokens; the parent
    # starts with one assistant message, delegates twice for 100 tokens each, then answers.
    delegate = {"name": "agent", "arguments": {"mode": "delegate", "task": "find it"}}
    model = write_script(
        tmp_path / "tree.yaml",
        [
            turn((400, 200), content="child finding"),
            turn((100, 0), tool_calls=[delegate]),
            turn((100, 0), tool_calls=[delegate]),
            turn((100, 0), content="parent done"),
        ],
    )
    async with InProcessExecutor(nats_url, namespace):
        parent = await create_trace(
            store,
            [
                ev.InputMessage(role="user", content="get ready"),
                ev.InputMessage(role="assistant", content="ready"),
                ev.InputMessage(role="user", content="delegate the work"),
            ],
            model=model,
            max_tokens=1000,
        )
        state = await wait_for_trace(store, parent, within=60)
    # Its own calls used 200 tokens; with the children's 2 x 600 the run is over 1000.
    assert state.totals.prompt_tokens + state.totals.completion_tokens == 200
    assert state.status == "stopped" and state.stop_reason == "max_tokens"
    assert state.run_usage.tokens == 1400
    stopped = await stopped_event(store, parent)
    assert stopped.used == ev.RunUsage(iterations=2, tokens=1400)
    children = [await trace_state(store, child) for child in state.subtraces]
    assert [child.config.max_tokens for child in children] == [900, 200]


async def test_children_running_side_by_side_cannot_together_escape_the_roots_max_tokens(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    # Children (from turn 0) glob for 200 tokens a call; each alone may spend the root's
    # 1000. The root starts with five assistant messages: it explores with turn 5.
    explore = {"name": "agent", "arguments": {"mode": "explore", "tasks": ["a", "b"]}}
    model = write_script(
        tmp_path / "pair.yaml",
        [
            *(
                turn((200, 0), tool_calls=[{"name": "glob", "arguments": {"pattern": f"*{n}"}}])
                for n in range(5)
            ),
            turn((1, 0), tool_calls=[explore]),
            turn((1, 0), content="root done"),
        ],
    )
    history: list[ev.InputMessage] = []
    for n in range(5):
        history += [
            ev.InputMessage(role="user", content=f"ready {n}?"),
            ev.InputMessage(role="assistant", content="ready"),
        ]
    history.append(ev.InputMessage(role="user", content="explore two questions"))
    async with InProcessExecutor(nats_url, namespace):
        root_id = await create_trace(store, history, model=model, max_tokens=1000)
        root = await wait_for_trace(store, root_id, within=60)
    children = [await trace_state(store, child) for child in root.subtraces]
    spent = sum(child.run_usage.tokens for child in children)
    # Each child checks the root's tree before every call, so together they stop once the
    # root's 1000 is used (plus at most the call each had in flight); alone each could
    # have spent 1000.
    assert spent <= 1000 + 2 * 200, spent
    assert [child.stop_reason for child in children] == ["max_tokens", "max_tokens"]
    assert root.status == "stopped" and root.stop_reason == "max_tokens"
    assert root.run_usage.tokens == spent + 1
