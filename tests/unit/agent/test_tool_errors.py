"""ToolErrorHandling: exceptions become tool messages; the turn goes on."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent import ToolContext, ToolError, ToolRegistry, tool
from longhaul.domain import events as ev

from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)


@tool
async def explode(ctx: ToolContext) -> str:
    """Always fails."""
    ctx.record(ev.GoalChanged(op="add", goal=ev.Goal(id="g9", title="never")))
    raise RuntimeError("disk on fire")


@tool
async def refuse() -> str:
    """Refuses on purpose."""
    raise ToolError("not today", code="not_today")


async def test_exceptions_become_error_messages_and_their_events_are_dropped(
    tmp_path: Path,
) -> None:
    model, _ = scripted(calls(call("explode"), call("refuse")), answer("recovered"))
    state = new_state()
    sink = MemorySink(state)
    engine = make_engine(tmp_path, tools=ToolRegistry([explode, refuse]))
    outcome = await engine.run_turn(state, sink, model=model)
    errors = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert [m.error_code for m in errors] == ["tool_error", "not_today"]
    assert "RuntimeError: disk on fire" in str(errors[0].content)
    assert str(errors[1].content) == "Error (not_today): not today"
    assert not sink.of_type(ev.GoalChanged) and "g9" not in state.goals.goals
    assert outcome.end == "completed"
