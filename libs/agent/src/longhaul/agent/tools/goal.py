"""``goal``: the trace's plan as a tree (add/under/after/focus/done/abandon → GoalChanged)."""

from __future__ import annotations

from typing import Literal

import msgspec
from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.result import ToolResult
from longhaul.domain.events import Goal, GoalChanged
from longhaul.domain.state import GoalTree, InvalidTransition


def _target(ctx: ToolContext, op: str, goal_id: str | None) -> Goal:
    tree = ctx.state.goals
    if op == "add":
        return Goal(id="", title="")
    target = goal_id or (tree.focus if op in ("done", "abandon") else None)
    if target is None:
        raise ToolError(f"goal op {op!r} needs goal_id", code="schema_mismatch")
    if target not in tree.goals:
        raise ToolError(
            f"unknown goal {target!r}; known: {', '.join(tree.order) or 'none'}",
            code="tool_call_invalid",
        )
    return tree.goals[target]


@tool(read_only=True)
async def goal(
    ctx: ToolContext,
    op: Literal["add", "under", "after", "focus", "done", "abandon"],
    title: str | None = None,
    goal_id: str | None = None,
    summary: str | None = None,
    reason: str | None = None,
    criteria: list[str] | None = None,
) -> ToolResult:
    """Manage your plan as a goal tree; every message is filed under the goal in focus.

    Args:
        op: add (top-level goal), under (child of goal_id), after (sibling of goal_id),
            focus (work on goal_id), done / abandon (goal_id, default: the goal in focus).
        title: the new goal's title (add, under, after).
        goal_id: the goal the op refers to.
        summary: what was achieved or why it was abandoned (done, abandon).
        reason: why this goal is needed (add, under, after): shown with the plan.
        criteria: what makes the goal done (add, under, after): ``evaluate`` with its
            ``target_goal_id`` judges against them.
    """
    tree = ctx.state.goals
    anchor = _target(ctx, op, goal_id)
    if op in ("add", "under", "after"):
        if not title:
            raise ToolError(f"goal op {op!r} needs a title", code="schema_mismatch")
        parent = {"add": tree.top, "under": anchor.id, "after": anchor.parent_id}[op]
        changed = Goal(
            id=tree.next_goal_id(),
            title=title,
            parent_id=parent,
            created_at_sequence=ctx.state.head_sequence,
            reason=reason,
            criteria=criteria or [],
        )
    else:
        changed = Goal(id=anchor.id, title=anchor.title, summary=summary)
    probe = msgspec.convert(msgspec.to_builtins(tree), GoalTree)
    try:
        probe.apply(op, changed, ctx.state.head_sequence)
    except InvalidTransition as exc:
        raise ToolError(str(exc), code="tool_call_invalid") from exc
    ctx.record(GoalChanged(op=op, goal=changed, at_sequence=ctx.state.head_sequence))
    return ToolResult(output=probe.render(), title=f"goal {op} {changed.id}")
