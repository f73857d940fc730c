"""The goal tree a trace plans with (the ``goal`` tool's add/under/after/focus/done/abandon)."""

from __future__ import annotations

from typing import Literal

import msgspec
from longhaul.domain.events import Goal
from longhaul.domain.state.errors import InvalidTransition

GoalOp = Literal["add", "under", "after", "focus", "done", "abandon"]


class GoalOpRecord(msgspec.Struct, kw_only=True):
    """One applied op and the message sequence it followed (to rebuild the tree at a cut)."""

    op: GoalOp
    goal: Goal
    at_sequence: int


class GoalTree(msgspec.Struct, kw_only=True):
    goals: dict[str, Goal] = msgspec.field(default_factory=dict)
    order: list[str] = msgspec.field(default_factory=list)
    focus: str | None = None
    log: list[GoalOpRecord] = msgspec.field(default_factory=list)

    def apply(self, op: GoalOp, goal: Goal, at_sequence: int) -> None:
        """Apply an op. ``goal`` carries the full goal for add/under/after, the id otherwise."""
        self._apply(op, goal)
        self.log.append(GoalOpRecord(op=op, goal=goal, at_sequence=at_sequence))

    def check(self, op: GoalOp, goal: Goal) -> None:
        """Raise :class:`InvalidTransition` if the op could not apply; changes nothing."""
        if op in ("add", "under", "after"):
            if goal.id in self.goals:
                raise InvalidTransition(f"goal {goal.id} already exists", code="goal_exists")
            if goal.parent_id is not None and goal.parent_id not in self.goals:
                raise InvalidTransition(
                    f"unknown parent goal {goal.parent_id}", code="goal_unknown"
                )
            return
        current = self.goals.get(goal.id)
        if current is None:
            raise InvalidTransition(f"unknown goal {goal.id}", code="goal_unknown")
        if op == "focus" and current.status in ("done", "abandoned"):
            raise InvalidTransition(f"goal {goal.id} is {current.status}", code="goal_closed")

    def _apply(self, op: GoalOp, goal: Goal) -> None:
        self.check(op, goal)
        if op in ("add", "under", "after"):
            self.goals[goal.id] = msgspec.structs.replace(goal)
            self.order.append(goal.id)
            return
        current = self.goals[goal.id]
        if op == "focus":
            if self.focus and self.focus in self.goals:
                previous = self.goals[self.focus]
                if previous.status == "in_progress":
                    previous.status = "pending"
            current.status = "in_progress"
            self.focus = goal.id
        else:
            current.status = "done" if op == "done" else "abandoned"
            if goal.summary:
                current.summary = goal.summary
            if self.focus == goal.id:
                self.focus = current.parent_id if current.parent_id in self.goals else None
                if self.focus and self.goals[self.focus].status == "pending":
                    self.goals[self.focus].status = "in_progress"

    def as_of(self, on_path: set[int]) -> GoalTree:
        """The tree rebuilt from the ops that followed messages in ``on_path``.

        Goals created after the cut disappear and an in-progress goal goes back to pending:
        the continued run re-decides its focus.
        """
        tree = GoalTree()
        for record in self.log:
            if record.at_sequence == 0 or record.at_sequence in on_path:
                tree.apply(record.op, record.goal, record.at_sequence)
        for goal in tree.goals.values():
            if goal.status == "in_progress":
                goal.status = "pending"
        tree.focus = None
        return tree

    def snapshot(self) -> list[Goal]:
        return [self.goals[goal_id] for goal_id in self.order]

    def completed_ids(self) -> set[str]:
        """Goals whose messages level-1 compaction may drop (done, and all ancestors' work)."""
        return {gid for gid, goal in self.goals.items() if goal.status in ("done", "abandoned")}

    def render(self) -> str:
        """A compact text outline for context injection."""
        marks = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "abandoned": "[-]"}
        children: dict[str | None, list[str]] = {}
        for gid in self.order:
            children.setdefault(self.goals[gid].parent_id, []).append(gid)
        lines: list[str] = []

        def walk(parent: str | None, depth: int) -> None:
            for gid in children.get(parent, []):
                goal = self.goals[gid]
                focus = " (focus)" if gid == self.focus else ""
                lines.append(f"{'  ' * depth}{marks[goal.status]} {gid}: {goal.title}{focus}")
                walk(gid, depth + 1)

        walk(None, 0)
        return "\n".join(lines) if lines else "(no goals yet)"
