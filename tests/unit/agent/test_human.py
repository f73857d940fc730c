"""Clarification: ask_human waits for the reply, which comes back as the call's result."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent import DEFAULT_ORDER, default_middleware
from longhaul.domain import events as ev
from longhaul.domain.config import MiddlewareEntry, PipelineConfig

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)


async def test_ask_human_waits_and_the_reply_is_the_tool_result(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("ask_human", {"question": "which db?"}, id="h1")))
    state = new_state()
    sink = MemorySink(state)
    outcome = await engine.run_turn(state, sink, model=model)
    [waiting] = sink.of_type(ev.Waiting)
    assert outcome.end == "waiting"
    assert (waiting.reason, waiting.tool_call_id, waiting.detail) == ("human", "h1", "which db?")
    assert state.unanswered_tool_calls()[0].id == "h1"

    await sink.emit([ev.HumanReplied(content="postgres")])
    model2, script2 = scripted(answer("using postgres"))
    outcome = await engine.run_turn(state, sink, model=model2)
    assert outcome.end == "completed"
    last_tool = script2.requests[0].messages[-1]
    assert last_tool == {
        "role": "tool",
        "content": "postgres",
        "tool_call_id": "h1",
        "name": "ask_human",
    }
    assert state.human_reply is None and state.wait_tool_call_id is None


async def test_without_clarification_the_tool_answers_that_nobody_is_there(tmp_path: Path) -> None:
    config = PipelineConfig(middleware=[MiddlewareEntry(name="Clarification", enabled=False)])
    engine = make_engine(tmp_path, config=config, middleware=default_middleware(config))
    assert len(engine.middleware) == len(DEFAULT_ORDER) - 1
    model, _ = scripted(calls(call("ask_human", {"question": "?"})), answer("decided myself"))
    state = new_state()
    outcome = await engine.run_turn(state, MemorySink(state), model=model)
    assert outcome.end == "completed"
    assert "No human is available" in str(state.messages[state.path[2]].content)
