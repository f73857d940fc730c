"""goal: add/under/after/focus/done/abandon become GoalChanged events with the tool result."""

from __future__ import annotations

from pathlib import Path

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


def goal(op: str, **fields: str) -> dict:
    return calls(call("goal", {"op": op, **fields}))


async def test_goal_ops_build_the_tree(tmp_path: Path) -> None:
    model, _ = scripted(
        goal("add", title="build"),
        goal("under", title="write code", goal_id="g1"),
        goal("after", title="write docs", goal_id="g2"),
        goal("focus", goal_id="g2"),
        goal("done", summary="code written"),
        goal("abandon", goal_id="g3"),
        goal("focus", goal_id="g3"),
        answer("ok"),
    )
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path).run_turn(state, sink, model=model)
    changes = sink.of_type(ev.GoalChanged)
    assert [(c.op, c.goal.id) for c in changes] == [
        ("add", "g1"), ("under", "g2"), ("after", "g3"), ("focus", "g2"), ("done", "g2"),
        ("abandon", "g3"),
    ]  # fmt: skip
    tree = state.goals
    assert tree.goals["g2"].parent_id == "g1" and tree.goals["g3"].parent_id == "g1"
    assert tree.goals["g2"].status == "done" and tree.goals["g2"].summary == "code written"
    assert tree.goals["g3"].status == "abandoned"
    results = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    # Each GoalChanged is emitted in the same batch as, and just before, its tool result.
    for change in changes:
        batch = next(b for b in sink.batches if change in b)
        assert isinstance(batch[-1], ev.MessageAppended) and batch[-1].role == "tool"
    assert results[-1].error_code == "tool_call_invalid"  # focusing an abandoned goal
    assert "abandoned" in str(results[-1].content)
    # Messages are filed under the goal in focus.
    focused = [m for m in sink.of_type(ev.MessageAppended) if m.goal_id == "g2"]
    assert focused


async def test_goal_ops_need_their_fields(tmp_path: Path) -> None:
    model, _ = scripted(goal("add"), goal("focus"), goal("done", goal_id="g7"), answer("ok"))
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path).run_turn(state, sink, model=model)
    codes = [m.error_code for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert codes == ["schema_mismatch", "schema_mismatch", "tool_call_invalid"]
    assert not sink.of_type(ev.GoalChanged)
