"""ContextInjection: every N steps, goal tree + running sub-agents + context hooks (registered
in code or named in ``pipeline.context_hooks``; a failing hook is logged and skipped)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from longhaul.agent import ContextHooks
from longhaul.agent.config_check import check_config
from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev
from longhaul.domain.config import ConfigError, PipelineConfig
from longhaul.domain.state import GoalTree, TraceState

from tests.unit.agent.support import AgentRun, answer, assert_tool_pairs_complete, call, calls


async def test_injected_every_n_steps_with_goals_and_hooks(tmp_path: Path) -> None:
    hooks = ContextHooks()
    hooks.register("tickets", lambda state, goals: "3 open tickets")
    hooks.register("silent", lambda state, goals: None)

    async def deadline(state: TraceState, goals: GoalTree) -> str:
        return f"deadline: friday ({len(goals.snapshot())} goal)"

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
    assert "tickets:\n3 open tickets" in body and "deadline:\ndeadline: friday (2 goal)" in body
    assert "silent" not in body
    third = run.script.requests[2].messages
    assert third[-1]["content"] == injected[0].content
    for request in run.script.requests:
        assert_tool_pairs_complete(request.messages)


async def test_every_sub_agent_is_listed_running_finished_failed_or_remote(
    tmp_path: Path,
) -> None:
    run = AgentRun(tmp_path, config=PipelineConfig(context_injection_every=1))
    spawn = ev.SubtraceSpawned
    await run.sink.emit(
        [
            spawn(child_trace_id="t_kid", tool_call_id="x", task="dig"),
            spawn(child_trace_id="t_done", tool_call_id="y", task="count"),
            spawn(child_trace_id="t_bad", tool_call_id="y", task="fetch"),
            spawn(child_trace_id="t_far", tool_call_id="z", task="ask", remote="peer"),
            ev.RemoteSubtraceLinked(child_trace_id="t_far", remote_id="agent://peer:1/t_r"),
            ev.SubtraceFinished(child_trace_id="t_done", status="completed", summary="42 rows"),
            ev.SubtraceFinished(child_trace_id="t_bad", status="failed", summary="failed: 404"),
        ]
    )
    await run.turn(calls(call("glob", {"pattern": "*"})), answer("ok"))
    [injected] = [m for m in run.sink.of_type(ev.MessageAppended) if m.name == "context"]
    body = str(injected.content)
    assert "Collaborators:\n" in body
    assert "- t_kid [agent, running]: dig" in body
    assert "- t_done [agent, completed]: 42 rows" in body
    assert "- t_bad [agent, failed]: failed: 404" in body
    assert "- agent://peer:1/t_r [agent, running]: ask" in body


def open_tickets(state: TraceState, goals: GoalTree) -> str:
    return f"tickets for {state.trace_id}"


def broken(state: TraceState, goals: GoalTree) -> str:
    raise RuntimeError("ticket server down")


async def test_configured_hooks_load_by_module_path_and_a_failing_one_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    module = __name__
    config = PipelineConfig(
        context_injection_every=1, context_hooks=[f"{module}:broken", f"{module}:open_tickets"]
    )
    hooks = ContextHooks.configured(config.context_hooks)
    run = AgentRun(tmp_path, config=config, context_hooks=hooks)
    with caplog.at_level(logging.ERROR, logger="longhaul.agent.context_hooks"):
        await run.turn(calls(call("glob", {"pattern": "*"})), answer("ok"))
    [injected] = [m for m in run.sink.of_type(ev.MessageAppended) if m.name == "context"]
    body = str(injected.content)
    assert f"{module}:open_tickets:\ntickets for t_test" in body
    assert "broken" not in body and run.sink.of_type(ev.Completed)
    assert any("broken failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "target",
    [
        "no.such.module:hook",
        f"{__name__}:missing",
        "no-such-entry-point",
        f"{__name__}:MODULE_NAME",
    ],
)
def test_a_hook_that_does_not_load_is_a_config_error(target: str) -> None:
    config = LonghaulConfig.model_validate({"pipeline": {"context_hooks": [target]}})
    with pytest.raises(ConfigError, match=r"pipeline\.context_hooks\[0\]"):
        check_config(config)


MODULE_NAME = "not callable"


async def test_a_trace_with_an_inbox_is_told_whom_it_can_message(tmp_path: Path) -> None:
    run = AgentRun(
        tmp_path,
        config=PipelineConfig(context_injection_every=1),
        trace_config=ev.TraceConfig(messaging=True),
    )
    await run.sink.emit([ev.SubtraceSpawned(child_trace_id="t_kid", tool_call_id="x", task="dig")])
    await run.turn(calls(call("glob", {"pattern": "*"})), answer("ok"))
    [injected] = [m for m in run.sink.of_type(ev.MessageAppended) if m.name == "context"]
    assert "You can message (send_message): t_kid" in str(injected.content)
