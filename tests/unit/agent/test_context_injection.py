"""ContextInjection: every N steps, goal tree + running sub-agents + context hooks."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent import ContextHooks
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig
from longhaul.domain.state import TraceState

from tests.unit.agent.support import AgentRun, answer, assert_tool_pairs_complete, call, calls


async def test_injected_every_n_steps_with_goals_and_hooks(tmp_path: Path) -> None:
    hooks = ContextHooks()
    hooks.register("tickets", lambda state: "3 open tickets")
    hooks.register("silent", lambda state: None)

    async def deadline(state: TraceState) -> str:
        return "deadline: friday"

    hooks.register("deadline", deadline)
    config = PipelineConfig(context_injection_every=2)
    turns = [
        calls(call("goal", {"op": "add", "title": "ship it"})),
        *(calls(call("glob", {"pattern": f"p{i}"})) for i in range(4)),
        answer("ok"),
    ]
    run = AgentRun(tmp_path, config=config, context_hooks=hooks)
    await run.turn(*turns)
    injected = [m for m in run.sink.of_type(ev.MessageAppended) if m.name == "context"]
    assert len(injected) == 2  # before the 3rd and the 5th model call
    body = str(injected[0].content)
    assert body.startswith("[Context after 2 steps]")
    assert "[ ] g1: ship it" in body
    assert "tickets:\n3 open tickets" in body and "deadline:\ndeadline: friday" in body
    assert "silent" not in body
    third = run.script.requests[2].messages
    assert third[-1]["content"] == injected[0].content
    for request in run.script.requests:
        assert_tool_pairs_complete(request.messages)


async def test_running_sub_agents_are_listed(tmp_path: Path) -> None:
    run = AgentRun(tmp_path, config=PipelineConfig(context_injection_every=1))
    await run.sink.emit([ev.SubtraceSpawned(child_trace_id="t_kid", tool_call_id="x", task="dig")])
    await run.turn(calls(call("glob", {"pattern": "*"})), answer("ok"))
    [injected] = [m for m in run.sink.of_type(ev.MessageAppended) if m.name == "context"]
    assert "t_kid (delegate): dig" in str(injected.content)
