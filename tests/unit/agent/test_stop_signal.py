"""The shell's stop signal cuts a turn short at its model call, never at a tool call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.contract import StopSignalled
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
    signal = asyncio.Event()
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
    signal = asyncio.Event()

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
    signal = asyncio.Event()

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
