"""LoopDetection: warn at the 2nd identical call, stop at the 3rd; per-tool frequency."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.domain import events as ev
from longhaul.domain.config import LoopDetectionConfig, PipelineConfig

from tests.unit.agent.support import AgentRun, answer, assert_tool_pairs_complete, call, calls


def glob_call(pattern: str) -> dict:
    return calls(call("glob", {"pattern": pattern}))


async def test_same_call_three_times_warns_at_second_and_stops_at_third(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    outcome = await run.turn(glob_call("*.py"), glob_call("*.py"), glob_call("*.py"))
    state, sink = run.state, run.sink

    warned = sink.of_type(ev.LoopWarned)
    assert len(warned) == 1 and warned[0].tool == "glob" and warned[0].count == 2
    # The warning was emitted right after the 2nd assistant message…
    before = sink.events[sink.events.index(warned[0]) - 1]
    assert isinstance(before, ev.MessageAppended) and before.role == "assistant"
    # …and rides at the END of the 3rd request, after the tool result, never in between.
    third = run.script.requests[2].messages
    assert third[-1] == {"role": "user", "content": warned[0].message}
    assert third[-2]["role"] == "tool"
    assert_tool_pairs_complete(third[:-1])

    assert outcome.end == "stopped" and outcome.stop_reason == "loop_detected"
    assert len(sink.of_type(ev.LoopStopped)) == 1
    assert sink.of_type(ev.Stopped)[0].reason == "loop_detected"
    assert state.status == "stopped" and state.stop_reason == "loop_detected"
    # The 3rd call never ran: it is answered as not run, the log stays well-formed.
    last = state.messages[state.head_sequence]
    assert last.role == "tool" and last.error_code == "not_run" and last.synthetic


async def test_same_tool_other_arguments_never_warns(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    outcome = await run.turn(glob_call("*.py"), glob_call("*.md"), glob_call("*.txt"), answer("ok"))
    assert outcome.end == "completed"
    assert not run.sink.of_type(ev.LoopWarned) and not run.sink.of_type(ev.LoopStopped)


async def test_argument_order_does_not_hide_a_repeat(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(
        calls(call("grep", '{"pattern": "x", "path": "."}')),
        calls(call("grep", '{"path": ".", "pattern": "x"}')),
        answer("ok"),
    )
    assert len(run.sink.of_type(ev.LoopWarned)) == 1


async def test_warning_is_consumed_by_the_next_assistant_message(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(glob_call("a"), glob_call("a"), glob_call("b"), glob_call("c"), answer("ok"))
    assert run.script.requests[2].messages[-1]["role"] == "user"
    assert run.script.requests[3].messages[-1]["role"] == "tool"
    assert run.state.pending_warnings == []


async def test_window_slides(tmp_path: Path) -> None:
    run = AgentRun(
        tmp_path, config=PipelineConfig(loop_detection=LoopDetectionConfig(window_size=2))
    )
    outcome = await run.turn(
        glob_call("a"), glob_call("b"), glob_call("c"), glob_call("a"), answer("x")
    )
    assert outcome.end == "completed" and not run.sink.of_type(ev.LoopWarned)


async def test_per_tool_frequency_warns_then_stops(tmp_path: Path) -> None:
    config = PipelineConfig(loop_detection=LoopDetectionConfig(tool_freq_warn=3, tool_freq_stop=5))
    run = AgentRun(tmp_path, config=config)
    outcome = await run.turn(*(glob_call(f"p{i}") for i in range(6)))
    warned = run.sink.of_type(ev.LoopWarned)
    assert [w.count for w in warned] == [3]
    assert outcome.stop_reason == "loop_detected"
    assert "5 times" in run.sink.of_type(ev.LoopStopped)[0].message


async def test_window_survives_a_new_turn(tmp_path: Path) -> None:
    """A loop that straddles turns (crash, wait) is still seen: the window is rebuilt."""
    run = AgentRun(tmp_path)
    with pytest.raises(AssertionError, match="crash"):
        await run.turn(glob_call("*"), glob_call("*"), AssertionError("crash"))
    assert len(run.sink.of_type(ev.LoopWarned)) == 1
    outcome = await run.turn(glob_call("*"))
    assert outcome.stop_reason == "loop_detected"


async def test_a_new_instruction_resets_the_counts(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(glob_call("*"), answer("done"))
    await run.sink.emit([ev.RunRequested(messages=[ev.InputMessage(role="user", content="again")])])
    await run.turn(glob_call("*"), answer("done again"))
    assert not run.sink.of_type(ev.LoopWarned)
