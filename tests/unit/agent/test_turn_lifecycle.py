"""Turn entry and exit: non-running traces, stop requests, the iteration budget, model
errors and a bad working directory (reflections: test_reflection)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig
from longhaul.llm.types import ModelError

from tests.unit.agent.support import AgentRun, MemorySink, answer, call, calls, trace_dir


async def test_stop_requested_before_the_turn(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.sink.emit([ev.StopRequested(reason="user")])
    outcome = await run.turn()
    assert outcome.end == "stopped" and outcome.stop_reason == "stop_requested"
    assert run.state.status == "stopped" and run.script.requests == []


class StopOnSecondAssistant(MemorySink):
    """A stop request arrives (caught up by the sink) right after the 2nd assistant message."""

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        await super().emit(events)
        assistants = [m for m in self.of_type(ev.MessageAppended) if m.role == "assistant"]
        if len(assistants) == 2 and not self.of_type(ev.StopRequested):
            await super().emit([ev.StopRequested()])


async def test_stop_requested_during_the_turn_ends_it_before_the_next_action(
    tmp_path: Path,
) -> None:
    turns = [calls(call("glob", {"pattern": f"p{i}"})) for i in range(5)]
    run = AgentRun(tmp_path, sink=StopOnSecondAssistant)
    outcome = await run.turn(*turns)
    assert outcome.end == "stopped" and len(run.script.requests) == 2
    assert not run.state.unanswered_tool_calls()


async def test_max_iterations_stops_the_trace_resumably(tmp_path: Path) -> None:
    turns = [calls(call("glob", {"pattern": f"p{i}"})) for i in range(5)]
    run = AgentRun(tmp_path, config=PipelineConfig(max_iterations=3))
    outcome = await run.turn(*turns)
    assert outcome.end == "max_iterations" and outcome.steps == 3
    assert run.state.status == "stopped" and run.state.stop_reason == "max_iterations"
    assert len(run.script.requests) == 3
    # Stopped traces continue on request.
    await run.sink.emit([ev.RunRequested(messages=[ev.InputMessage(role="user", content="go on")])])
    assert (await run.turn(answer("finished"))).end == "completed"


async def test_trace_config_max_iterations_wins(tmp_path: Path) -> None:
    turns = [calls(call("glob", {"pattern": f"p{i}"})) for i in range(5)]
    run = AgentRun(tmp_path, trace_config=ev.TraceConfig(max_iterations=1))
    outcome = await run.turn(*turns)
    assert outcome.steps == 1 and len(run.script.requests) == 1


@pytest.mark.parametrize("status", ["completed", "failed", "stopped"])
async def test_final_traces_are_left_alone(tmp_path: Path, status: str) -> None:
    run = AgentRun(tmp_path)
    final = {
        "completed": ev.Completed(summary="x"),
        "failed": ev.Failed(error="x"),
        "stopped": ev.Stopped(reason="user"),
    }[status]
    await run.sink.emit([final])
    before = len(run.sink.events)
    outcome = await run.turn()
    assert outcome.end == status and len(run.sink.events) == before
    assert run.script.requests == []


async def test_model_error_fails_the_trace(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    outcome = await run.turn(ModelError("400 context too long"))
    assert outcome.end == "failed" and outcome.stop_reason == "model_error"
    assert "context too long" in str(run.state.error)


async def test_working_dir_outside_the_root_fails_clearly(tmp_path: Path) -> None:
    run = AgentRun(tmp_path / "root", trace_config=ev.TraceConfig(working_dir="/etc"))
    outcome = await run.turn()
    assert outcome.end == "failed" and outcome.stop_reason == "config_error"
    assert "outside this trace's working directory" in str(run.state.error)
    assert run.script.requests == []


async def test_relative_working_dir_is_created_under_the_trace_s_directory(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    run = AgentRun(tmp_path, trace_config=ev.TraceConfig(working_dir="proj/a"))
    await run.turn(calls(call("bash", {"command": "pwd"})), answer("ok"))
    state = run.state
    assert str(home / "proj" / "a") in str(state.messages[state.path[2]].content)


async def test_a_final_answer_left_by_a_crash_is_finished_without_a_model_call(
    tmp_path: Path,
) -> None:
    run = AgentRun(tmp_path)
    await run.sink.emit(
        [ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant", content="42")]
    )
    outcome = await run.turn()
    assert outcome.end == "completed" and run.state.summary == "42"
    assert run.script.requests == []
