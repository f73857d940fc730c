"""DanglingToolCall: a call without a result is healed once, persistently, before sending."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState

from tests.unit.agent.support import (
    AgentRun,
    MemorySink,
    answer,
    assert_tool_pairs_complete,
    call,
    calls,
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
    # Turn 1 dies right after the assistant message (two calls, no results yet).
    run = AgentRun(tmp_path, sink=lambda state: CrashAfter(state, limit=1))
    state = run.state
    with pytest.raises(ConnectionError):
        await run.turn(
            calls(call("glob", {"pattern": "*"}, id="g1"), call("agent", {"task": "x"}, id="a1"))
        )
    assert [c.id for c in state.unanswered_tool_calls()] == ["g1", "a1"]

    # Turn 2 heals, then dies in the model call: the heal is persisted.
    run.sink = MemorySink(state)
    with pytest.raises(ConnectionError):
        await run.turn(ConnectionError("model host died"))
    healed = [m for m in run.sink.of_type(ev.MessageAppended) if m.synthetic]
    assert [(m.tool_call_id, m.error_code) for m in healed] == [
        ("g1", "interrupted"),
        ("a1", "interrupted"),
    ]
    assert "Call glob again" in str(healed[0].content)
    assert_tool_pairs_complete(run.script.requests[0].messages)

    # Turn 3 finds nothing to heal.
    run.sink = MemorySink(state)
    await run.turn(answer("done"))
    assert not [m for m in run.sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert_tool_pairs_complete(run.script.requests[0].messages)


class StopArrivesAfterSpawn(MemorySink):
    """A stop request lands (as the executor's sink would catch it up) right after a spawn."""

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        await super().emit(events)
        if any(isinstance(event, ev.SubtraceSpawned) for event in events):
            await super().emit([ev.StopRequested(reason="user")])


async def test_a_stop_between_calls_answers_the_rest_and_names_started_children(
    tmp_path: Path,
) -> None:
    run = AgentRun(tmp_path, sink=StopArrivesAfterSpawn)
    state, sink = run.state, run.sink
    outcome = await run.turn(
        calls(call("agent", {"task": "x"}, id="a1"), call("glob", {"pattern": "*"}, id="g1"))
    )
    assert outcome.end == "stopped" and outcome.stop_reason == "stop_requested"
    child = next(iter(state.subtraces))
    answers = {m.tool_call_id: m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"}
    assert answers["a1"].error_code == "not_run"
    assert child in str(answers["a1"].content) and "continue_from" in str(answers["a1"].content)
    assert "Call glob again" in str(answers["g1"].content)
    assert not state.unanswered_tool_calls() and state.status == "stopped"
