"""Tool approval: calls to listed tools wait for a person; approved ones run, denied ones tell
the model why; the gate cannot be configured away."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from longhaul.agent import default_middleware
from longhaul.agent.middleware.approval import ToolApproval
from longhaul.domain import events as ev
from longhaul.domain.config import MiddlewareEntry, PipelineConfig
from longhaul.domain.state.errors import InvalidTransition

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
    trace_dir,
)


def approval_state(*tools: str) -> tuple:
    state = new_state("tidy up", config=ev.TraceConfig(approval=list(tools)))
    return state, MemorySink(state)


async def test_a_listed_tool_waits_and_others_in_the_same_turn_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    engine = make_engine(tmp_path)
    model, _ = scripted(
        calls(
            call("read", {"path": "notes.txt"}, id="r1"),
            call("bash", {"command": "rm notes.txt"}, id="b1"),
        )
    )
    state, sink = approval_state("bash")
    outcome = await engine.run_turn(state, sink, model=model)
    assert outcome.end == "waiting"
    [waiting] = sink.of_type(ev.Waiting)
    assert (waiting.reason, waiting.pending_calls) == ("approval", ["b1"])
    assert (state.status, state.wait_reason, state.approval_pending) == (
        "waiting",
        "approval",
        ["b1"],
    )
    assert [c.id for c in state.unanswered_tool_calls()] == ["b1"]  # read ran
    assert (tmp_path / "notes.txt").exists()


async def test_an_approved_call_runs_and_the_loop_goes_on(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("bash", {"command": "echo approved-run > out.txt"}, id="b1")))
    state, sink = approval_state("bash")
    await engine.run_turn(state, sink, model=model)
    await sink.emit([ev.ToolDecided(tool_call_id="b1", approved=True)])
    assert state.status == "running"
    model2, script2 = scripted(answer("done"))
    outcome = await engine.run_turn(state, sink, model=model2)
    assert outcome.end == "completed"
    assert (home / "out.txt").read_text().strip() == "approved-run"
    result = script2.requests[0].messages[-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "b1"


async def test_a_denied_call_never_runs_and_the_model_learns_why(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("bash", {"command": "touch never.txt"}, id="b1")))
    state, sink = approval_state("*")
    await engine.run_turn(state, sink, model=model)
    await sink.emit([ev.ToolDecided(tool_call_id="b1", approved=False, reason="not on prod")])
    model2, script2 = scripted(answer("understood"))
    outcome = await engine.run_turn(state, sink, model=model2)
    assert outcome.end == "completed"
    assert not (tmp_path / "never.txt").exists()
    result = script2.requests[0].messages[-1]
    assert result["tool_call_id"] == "b1" and "denied" in result["content"]
    assert "not on prod" in result["content"]


async def test_several_pending_calls_each_need_a_decision(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    engine = make_engine(tmp_path)
    model, _ = scripted(
        calls(
            call("bash", {"command": "echo one > one.txt"}, id="b1"),
            call("bash", {"command": "echo two > two.txt"}, id="b2"),
        )
    )
    state, sink = approval_state("bash")
    await engine.run_turn(state, sink, model=model)
    assert state.approval_pending == ["b1", "b2"]
    await sink.emit([ev.ToolDecided(tool_call_id="b2", approved=False)])
    assert state.status == "waiting"  # b1 still undecided
    with pytest.raises(InvalidTransition):  # decided already
        state.check(ev.ToolDecided(tool_call_id="b2", approved=True))
    with pytest.raises(InvalidTransition):  # not a pending call
        state.check(ev.ToolDecided(tool_call_id="nope", approved=True))
    await sink.emit([ev.ToolDecided(tool_call_id="b1", approved=True)])
    model2, _ = scripted(answer("one of two"))
    assert (await engine.run_turn(state, sink, model=model2)).end == "completed"
    assert (home / "one.txt").exists() and not (home / "two.txt").exists()


async def test_ask_human_never_needs_approval(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("ask_human", {"question": "which?"}, id="h1")))
    state, sink = approval_state("*")
    await engine.run_turn(state, sink, model=model)
    assert state.wait_reason == "human" and state.approval_pending == []


def test_the_gate_cannot_be_switched_off_and_is_innermost() -> None:
    with pytest.raises(ValueError, match="framework layer"):
        default_middleware(
            PipelineConfig(middleware=[MiddlewareEntry(name="ToolApproval", enabled=False)])
        )
    assert isinstance(default_middleware()[-1], ToolApproval)


async def test_with_auto_execute_off_the_client_runs_every_call(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("server side")
    engine = make_engine(tmp_path)
    model, _ = scripted(
        calls(
            call("read", {"path": "secret.txt"}, id="c1"),
            call("glob", {"pattern": "*"}, id="c2"),
        )
    )
    state = new_state("use my tools", config=ev.TraceConfig(auto_execute_tools=False))
    sink = MemorySink(state)
    outcome = await engine.run_turn(state, sink, model=model)
    [waiting] = sink.of_type(ev.Waiting)
    assert outcome.end == "waiting"
    assert (waiting.reason, waiting.pending_calls) == ("client_tools", ["c1", "c2"])
    results = [ev.ClientToolResult(tool_call_id="c1", content="client side")]
    await sink.emit([ev.ToolResultsPosted(results=results)])
    assert state.status == "waiting" and state.client_pending == ["c2"]
    with pytest.raises(InvalidTransition):  # answered already
        state.check(ev.ToolResultsPosted(results=results))
    failed = [ev.ClientToolResult(tool_call_id="c2", content="no such dir", is_error=True)]
    await sink.emit([ev.ToolResultsPosted(results=failed)])
    model2, script2 = scripted(answer("done"))
    assert (await engine.run_turn(state, sink, model=model2)).end == "completed"
    sent = {
        m["tool_call_id"]: m["content"] for m in script2.requests[0].messages if m["role"] == "tool"
    }
    assert sent["c1"] == "client side"  # the server never read its own file
    assert "no such dir" in sent["c2"]


RISKY = PipelineConfig.model_validate(
    {
        "approval": {
            "rules": [
                {"tool": "bash", "argument": "rm ", "deadline_s": 30, "on_deadline": "stop"},
                {"read_only": True, "action": "never"},
            ]
        }
    }
)


async def test_a_risk_rule_asks_by_tool_and_argument_and_an_edited_call_runs(
    tmp_path: Path,
) -> None:
    """``bash`` with ``rm `` waits (with the rule's deadline), plain ``bash`` and read-only
    tools run; approved with edited arguments, the edited command is what runs, the model is
    told, and arguments that do not fit the schema never run."""
    home = trace_dir(tmp_path)
    (home / "keep.txt").write_text("keep me")
    engine = make_engine(tmp_path, config=RISKY)
    model, _ = scripted(
        calls(
            call("read", {"path": "keep.txt"}, id="r1"),
            call("bash", {"command": "echo plain > plain.txt"}, id="b0"),
            call("bash", {"command": "rm keep.txt"}, id="b1"),
        )
    )
    state = new_state("tidy up")
    sink = MemorySink(state)
    before = time.time()
    assert (await engine.run_turn(state, sink, model=model)).end == "waiting"
    [waiting] = sink.of_type(ev.Waiting)
    assert waiting.pending_calls == ["b1"] and waiting.on_deadline == "stop"
    assert waiting.deadline is not None and 29 < waiting.deadline - before < 31
    assert (home / "plain.txt").exists()
    edited = {"command": "echo edited > edited.txt"}
    await sink.emit([ev.ToolDecided(tool_call_id="b1", approved=True, arguments=edited)])
    model2, script2 = scripted(answer("done"))
    assert (await engine.run_turn(state, sink, model=model2)).end == "completed"
    assert (home / "keep.txt").exists() and (home / "edited.txt").exists()
    result = script2.requests[0].messages[-1]
    assert result["tool_call_id"] == "b1" and "edited arguments" in result["content"]


async def test_edited_arguments_are_refused_for_a_denial_and_checked_again_before_running(
    tmp_path: Path,
) -> None:
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("bash", {"command": "echo model"}, id="b1")))
    state, sink = approval_state("bash")
    await engine.run_turn(state, sink, model=model)
    with pytest.raises(InvalidTransition):
        state.check(ev.ToolDecided(tool_call_id="b1", approved=False, arguments={"x": 1}))
    await sink.emit([ev.ToolDecided(tool_call_id="b1", approved=True, arguments={"command": 5})])
    model2, script2 = scripted(answer("ok"))
    await engine.run_turn(state, sink, model=model2)
    result = script2.requests[0].messages[-1]
    assert "did not run" in result["content"]
