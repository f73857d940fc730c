"""DanglingToolCall: a call without a result is healed once, persistently, before sending."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from longhaul.core import events as ev
from longhaul.core.state import TraceState

from tests.unit.agent.support import (
    MemorySink,
    answer,
    assert_tool_pairs_complete,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)


class CrashAfter(MemorySink):
    """Applies events like the executor's sink, then dies once ``limit`` events went out."""

    def __init__(self, state: TraceState, limit: int) -> None:
        super().__init__(state)
        self.limit = limit

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        if len(self.events) + len(events) > self.limit:
            raise ConnectionError("executor died")
        await super().emit(events)


async def test_dangling_call_is_healed_exactly_once(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    state = new_state()
    # Turn 1 dies right after the assistant message (two calls, no results yet).
    crashing = CrashAfter(state, limit=1)
    model, _ = scripted(
        calls(call("glob", {"pattern": "*"}, id="g1"), call("agent", {"task": "x"}, id="a1"))
    )
    with pytest.raises(ConnectionError):
        await engine.run_turn(state, crashing, model=model)
    assert [c.id for c in state.unanswered_tool_calls()] == ["g1", "a1"]

    # Turn 2 heals, then dies in the model call: the heal is persisted.
    sink = MemorySink(state)
    model2, script2 = scripted(ConnectionError("model host died"))
    with pytest.raises(ConnectionError):
        await engine.run_turn(state, sink, model=model2)
    healed = [m for m in sink.of_type(ev.MessageAppended) if m.synthetic]
    assert [(m.tool_call_id, m.error_code) for m in healed] == [
        ("g1", "interrupted"),
        ("a1", "interrupted"),
    ]
    assert "Call glob again" in str(healed[0].content)
    assert_tool_pairs_complete(script2.requests[0].messages)

    # Turn 3 finds nothing to heal.
    sink3 = MemorySink(state)
    model3, script3 = scripted(answer("done"))
    await engine.run_turn(state, sink3, model=model3)
    assert not [m for m in sink3.of_type(ev.MessageAppended) if m.role == "tool"]
    assert_tool_pairs_complete(script3.requests[0].messages)


class StopArrivesAfterSpawn(MemorySink):
    """A stop request lands (as the executor's sink would catch it up) right after a spawn."""

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        await super().emit(events)
        if any(isinstance(event, ev.SubtraceSpawned) for event in events):
            await super().emit([ev.StopRequested(reason="user")])


async def test_a_stop_between_calls_answers_the_rest_and_names_started_children(
    tmp_path: Path,
) -> None:
    state = new_state()
    sink = StopArrivesAfterSpawn(state)
    model, _ = scripted(
        calls(call("agent", {"task": "x"}, id="a1"), call("glob", {"pattern": "*"}, id="g1"))
    )
    outcome = await make_engine(tmp_path).run_turn(state, sink, model=model)
    assert outcome.end == "stopped" and outcome.stop_reason == "stop_requested"
    child = next(iter(state.subtraces))
    answers = {m.tool_call_id: m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"}
    assert answers["a1"].error_code == "not_run"
    assert child in str(answers["a1"].content) and "continue_from" in str(answers["a1"].content)
    assert "Call glob again" in str(answers["g1"].content)
    assert not state.unanswered_tool_calls() and state.status == "stopped"
