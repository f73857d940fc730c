"""Property: whatever the model does — valid, invalid, unknown and repeated calls, sub-agents,
questions, errors, crashes mid-turn — every request it receives answers each tool call before
the next non-tool message."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelError, ModelRequest

from tests.unit.agent.support import MemorySink, assert_tool_pairs_complete, make_engine, new_state

CALLS = st.sampled_from(
    [
        {"name": "glob", "arguments": {"pattern": "*"}},
        {"name": "glob", "arguments": {"pattern": 5}},
        {"name": "read", "arguments": {"path": "missing.txt"}},
        {"name": "read", "arguments": {"path": "../escape"}},
        {"name": "agent", "arguments": {"task": "sub task"}},
        {"name": "agent", "arguments": {"mode": "explore", "tasks": ["a", "b"]}},
        {"name": "ask_human", "arguments": {"question": "?"}},
        {"name": "goal", "arguments": {"op": "add", "title": "a goal"}},
        {"name": "goal", "arguments": {"op": "done"}},
        {"name": "no_such_tool", "arguments": {}},
        {"name": "bash", "arguments": "{not json"},
    ]
)
MOVES = st.one_of(
    st.builds(lambda text: {"content": text}, st.text(max_size=20)),
    st.builds(lambda cs: {"tool_calls": cs}, st.lists(CALLS, min_size=1, max_size=5)),
    st.just("model_error"),
    st.just("crash"),
)


class Crash(Exception):
    """The executor died (not a model error: nothing records it)."""


class CrashingSink(MemorySink):
    def __init__(self, state: TraceState, budget: int | None) -> None:
        super().__init__(state)
        self.budget = budget

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        if self.budget is not None:
            self.budget -= len(events)
            if self.budget < 0:
                raise Crash("sink died")
        await super().emit(events)


def make_model(moves: list[Any], requests: list[ModelRequest]) -> ScriptedModel:
    remaining = list(moves)

    def script(request: ModelRequest) -> dict[str, Any]:
        requests.append(request)
        move = remaining.pop(0) if remaining else {"content": "final"}
        if move == "model_error":
            raise ModelError("provider down")
        if move == "crash":
            raise Crash("model host died")
        return move

    return ScriptedModel(script, name="scripted:prop")


async def wake(state: TraceState, sink: MemorySink) -> None:
    """Play the other services: answer what the trace waits for, continue ended traces."""
    if state.status == "waiting" and state.wait_reason == "human":
        await sink.emit([ev.HumanReplied(content="yes")])
    elif state.status == "waiting" and state.wait_reason == "subtraces":
        for child in [info.child_trace_id for info in state.running_subtraces()]:
            await sink.emit([ev.SubtraceFinished(child_trace_id=child, status="completed")])
    elif state.status in ("completed", "failed", "stopped"):
        await sink.emit([ev.RunRequested(messages=[ev.InputMessage(role="user", content="go")])])


WORKDIR = Path(tempfile.mkdtemp(prefix="longhaul-prop-"))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    moves=st.lists(MOVES, min_size=1, max_size=12),
    crash_budgets=st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=6, max_size=6),
)
async def test_every_request_answers_every_tool_call(
    moves: list[Any], crash_budgets: list[int | None]
) -> None:
    requests: list[ModelRequest] = []
    model = make_model(moves, requests)
    engine = make_engine(WORKDIR)
    state = new_state("start")
    for budget in crash_budgets:
        sink = CrashingSink(state, budget)
        try:
            await engine.run_turn(state, sink, model=model)
        except Crash:
            pass
        await wake(state, MemorySink(state))
    assert requests, "the model was never called"
    for request in requests:
        assert_tool_pairs_complete(request.messages)
