"""The shell's stop signal cuts a turn short at its model call, never at a tool call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.contract import StopSignal, StopSignalled
from longhaul.llm.types import ModelRequest

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)


async def test_a_signal_set_before_the_call_asks_the_model_nothing(tmp_path: Path) -> None:
    model, script = scripted(answer("never asked"))
    state = new_state()
    signal = StopSignal()
    signal.set()
    with pytest.raises(StopSignalled):
        await make_engine(tmp_path).run_turn(
            state, MemorySink(state), model=model, stop_signal=signal
        )
    assert script.requests == []
    assert [m.role for m in state.main_path()] == ["user"]


async def test_a_signal_during_a_tool_lets_it_finish_and_skips_the_next_call(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.txt").write_text("x")
    signal = StopSignal()

    def glob_then_stop(request: ModelRequest) -> dict[str, Any]:
        signal.set()  # heard while this answer's call runs
        return calls(call("glob", {"pattern": "*.txt"}, id="call_1"))

    model, script = scripted(glob_then_stop, answer("never asked"))
    state = new_state()
    sink = MemorySink(state)
    with pytest.raises(StopSignalled):
        await make_engine(tmp_path).run_turn(state, sink, model=model, stop_signal=signal)
    assert len(script.requests) == 1
    assert [m.role for m in state.main_path()] == ["user", "assistant", "tool"]
    assert state.main_path()[-1].tool_call_id == "call_1"
    assert not state.unanswered_tool_calls()


async def test_an_answer_that_came_back_is_kept(tmp_path: Path) -> None:
    signal = StopSignal()

    def answer_and_stop(request: ModelRequest) -> dict[str, Any]:
        signal.set()
        return answer("done anyway")

    model, _ = scripted(answer_and_stop)
    state = new_state()
    outcome = await make_engine(tmp_path).run_turn(
        state, MemorySink(state), model=model, stop_signal=signal
    )
    assert outcome.end == "completed"
    assert state.main_path()[-1].content == "done anyway"


async def test_the_model_call_runs_in_the_turns_own_task(tmp_path: Path) -> None:
    """No task (nor a waiter task) per model call: the signal cancels the turn's task."""
    signal = StopSignal()
    tasks: list[asyncio.Task[Any] | None] = []

    def answer_in(request: ModelRequest) -> dict[str, Any]:
        tasks.append(asyncio.current_task())
        return answer("done")

    model, _ = scripted(answer_in)
    state = new_state()
    turn = asyncio.ensure_future(
        make_engine(tmp_path).run_turn(state, MemorySink(state), model=model, stop_signal=signal)
    )
    assert (await turn).end == "completed"
    assert tasks == [turn]


async def test_a_signal_from_another_task_cuts_the_call_and_the_turn_goes_on_uncancelled(
    tmp_path: Path,
) -> None:
    signal = StopSignal()
    held = asyncio.Event()

    async def hold(request: ModelRequest) -> dict[str, Any]:
        held.set()
        await asyncio.Event().wait()  # never answers: only the signal ends it
        raise AssertionError("unreachable")

    model, _ = scripted(hold)
    state = new_state()
    turn = asyncio.ensure_future(
        make_engine(tmp_path).run_turn(state, MemorySink(state), model=model, stop_signal=signal)
    )
    await asyncio.wait_for(held.wait(), 10)
    signal.set()
    with pytest.raises(StopSignalled):
        await turn
    assert not turn.cancelled()
