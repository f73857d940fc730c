"""The goal tree a trace plans with (the ``goal`` tool's add/under/after/focus/done/abandon).

Besides the model's own goals the fold keeps two kinds the model never creates: the **root
goal** (``root``, the trace's task, made when the trace is created, so a trace that never
plans still has one goal its work is filed under) and one **``agent_call`` goal** per
``agent`` / ``evaluate`` call (``a1``, ``a2``…, under the goal in focus, from the call's
``subtrace_spawned`` events; settled with the children's summaries when the last one ends).
Each goal also has its own cost (``stats``: the messages filed under it, and for an
``agent_call`` goal what its children reported), summed up the tree by :meth:`cumulative`.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from longhaul.domain.events import Goal
from longhaul.domain.state.errors import InvalidTransition

GoalOp = Literal["add", "under", "after", "focus", "done", "abandon", "put"]
"""``put`` is the fold's own op (root and ``agent_call`` goals): the goal replaces its entry."""

ROOT = "root"
ROOT_REASON = "automatic root goal: the trace's task"
CLOSED = ("done", "abandoned")


class GoalStats(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What work filed under a goal used: model calls, prompt + completion tokens, cost and
    duration (model and tool time of its messages; a sub-agent's run time)."""

    model_calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    duration_ms: int = 0

    def plus(self, other: GoalStats) -> GoalStats:
        return GoalStats(
            model_calls=self.model_calls + other.model_calls,
            tokens=self.tokens + other.tokens,
            cost=self.cost + other.cost,
            duration_ms=self.duration_ms + other.duration_ms,
        )


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
    stats: dict[str, GoalStats] = msgspec.field(default_factory=dict)
    """Each goal's own use (``self_stats``), by goal id; kept across a rewind (it was spent),
    a dropped goal's by its nearest kept ancestor."""

    def apply(self, op: GoalOp, goal: Goal, at_sequence: int) -> None:
        """Apply an op. ``goal`` carries the full goal for add/under/after/put, the id
        otherwise."""
        self._apply(op, goal)
        self.log.append(GoalOpRecord(op=op, goal=goal, at_sequence=at_sequence))

    def check(self, op: GoalOp, goal: Goal) -> None:
        """Raise :class:`InvalidTransition` if the op could not apply; changes nothing."""
        if op == "put":
            return
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
        if current.type == "agent_call":
            raise InvalidTransition(
                f"goal {goal.id} is a sub-agent call: it ends with its sub-agents",
                code="goal_closed",
            )
        if goal.id == ROOT and op in ("done", "abandon"):
            raise InvalidTransition("the root goal ends with the trace", code="goal_closed")
        if op == "focus" and current.status in CLOSED:
            raise InvalidTransition(f"goal {goal.id} is {current.status}", code="goal_closed")

    def _apply(self, op: GoalOp, goal: Goal) -> None:
        self.check(op, goal)
        if op in ("add", "under", "after", "put"):
            if goal.id not in self.goals:
                self.order.append(goal.id)
            self.goals[goal.id] = msgspec.structs.replace(goal)
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

    # ------------------------------------------------------------------ the fold's own goals

    def open_root(self, title: str) -> None:
        """The root goal, in focus: every message is filed under a goal from the start."""
        root = Goal(id=ROOT, title=title, status="in_progress", reason=ROOT_REASON)
        self.apply("put", root, 0)
        self.focus = ROOT

    @property
    def top(self) -> str | None:
        """Where a new top-level goal goes: under the root goal (``None`` for an old log's
        tree, which has none)."""
        return ROOT if ROOT in self.goals else None

    def next_goal_id(self) -> str:
        """``g1``, ``g2``…: the goal tool's goals are numbered on their own."""
        mine = sum(1 for gid, g in self.goals.items() if g.type == "goal" and gid != ROOT)
        return f"g{mine + 1}"

    def call_goal(self, tool_call_id: str) -> Goal | None:
        for goal in self.goals.values():
            if goal.type == "agent_call" and goal.tool_call_id == tool_call_id:
                return goal
        return None

    def spawned(
        self, tool_call_id: str, child: str, mode: str, task: str, at_sequence: int
    ) -> Goal:
        """A sub-trace of one ``agent`` / ``evaluate`` call: the call's goal gains it (made
        under the goal in focus by the call's first spawn); returns that goal."""
        current = self.call_goal(tool_call_id)
        if current is not None:
            if child in current.sub_trace_ids:
                return current
            children = [*current.sub_trace_ids, child]
            title = f"{mode}: {len(children)} sub-agents"
            goal = msgspec.structs.replace(current, sub_trace_ids=children, title=title)
        else:
            mine = sum(1 for g in self.goals.values() if g.type == "agent_call")
            goal = Goal(
                id=f"a{mine + 1}",
                title=f"{mode}: {task.strip().splitlines()[0][:80] if task.strip() else child}",
                parent_id=self.focus,
                status="in_progress",
                created_at_sequence=at_sequence,
                type="agent_call",
                mode=mode,
                sub_trace_ids=[child],
                tool_call_id=tool_call_id,
            )
        self.apply("put", goal, at_sequence)
        return goal

    def settled(self, tool_call_id: str, results: list[tuple[str, str, str]]) -> None:
        """The call's children all ended (``(trace id, status, summary)`` each): its goal is
        done when every one completed, else abandoned, with their summaries."""
        current = self.call_goal(tool_call_id)
        if current is None:
            return
        ok = all(status == "completed" for _, status, _ in results)
        summary = "\n".join(f"{child} ({status}): {text[:300]}" for child, status, text in results)
        goal = msgspec.structs.replace(
            current, status="done" if ok else "abandoned", summary=summary
        )
        at = next((r.at_sequence for r in self.log if r.goal.id == current.id), 0)
        self.apply("put", goal, at)

    # ------------------------------------------------------------------ cost per goal

    def charge(self, goal_id: str | None, used: GoalStats) -> None:
        """Add ``used`` to the goal's own stats (an unfiled message: to the root goal)."""
        key = goal_id or self.top
        if key is None:
            return
        self.stats[key] = self.stats.get(key, GoalStats()).plus(used)

    def cumulative(self) -> dict[str, GoalStats]:
        """Each goal's own stats plus its descendants', by goal id."""
        children: dict[str, list[str]] = {}
        for gid in self.order:
            parent = self.goals[gid].parent_id
            if parent is not None:
                children.setdefault(parent, []).append(gid)
        total: dict[str, GoalStats] = {}

        def walk(gid: str) -> GoalStats:
            summed = self.stats.get(gid, GoalStats())
            for child in children.get(gid, []):
                summed = summed.plus(walk(child))
            total[gid] = summed
            return summed

        for gid in self.order:
            if self.goals[gid].parent_id not in self.goals:
                walk(gid)
        return total

    # ------------------------------------------------------------------ views

    def as_of(self, on_path: set[int]) -> GoalTree:
        """The tree rebuilt from the ops that followed messages in ``on_path``.

        Goals created after the cut disappear and an in-progress goal goes back to pending:
        the continued run re-decides its focus (from the root goal, if there is one). What a
        dropped goal spent stays with its nearest kept ancestor: a goal given its id later
        starts from nothing.
        """
        tree = GoalTree()
        for record in self.log:
            if record.at_sequence == 0 or record.at_sequence in on_path:
                tree.apply(record.op, record.goal, record.at_sequence)
        for gid, used in self.stats.items():
            keeper: str | None = gid
            while keeper is not None and keeper not in tree.goals:
                parent = self.goals.get(keeper)
                keeper = parent.parent_id if parent is not None else None
            tree.charge(keeper, used)
        for gid, goal in tree.goals.items():
            if goal.status == "in_progress" and gid != ROOT and goal.type == "goal":
                goal.status = "pending"
        tree.focus = tree.top
        if tree.focus is not None:
            tree.goals[tree.focus].status = "in_progress"
        return tree

    def snapshot(self) -> list[Goal]:
        return [self.goals[goal_id] for goal_id in self.order]

    def completed_ids(self) -> set[str]:
        """Goals whose messages level-1 compaction may drop (done, and all ancestors' work)."""
        return {gid for gid, goal in self.goals.items() if goal.status in CLOSED}

    def render(self, *, summaries: bool = False) -> str:
        """A compact text outline for context injection; ``summaries`` adds each closed
        goal's summary and each goal's reason (the full view compaction is shown)."""
        marks = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "abandoned": "[-]"}
        children: dict[str | None, list[str]] = {}
        for gid in self.order:
            parent = self.goals[gid].parent_id
            children.setdefault(parent if parent in self.goals else None, []).append(gid)
        lines: list[str] = []

        def walk(parent: str | None, depth: int) -> None:
            for gid in children.get(parent, []):
                goal = self.goals[gid]
                focus = " (focus)" if gid == self.focus else ""
                kind = f" [{goal.mode} → {', '.join(goal.sub_trace_ids)}]" if goal.mode else ""
                pad = "  " * depth
                lines.append(f"{pad}{marks[goal.status]} {gid}: {goal.title}{kind}{focus}")
                if summaries and goal.reason and gid != ROOT:
                    lines.append(f"{pad}    why: {goal.reason}")
                if summaries and goal.criteria:
                    lines.append(f"{pad}    done when: {'; '.join(goal.criteria)}")
                if summaries and goal.summary and goal.status in CLOSED:
                    text = goal.summary.replace("\n", f"\n{pad}    ")
                    lines.append(f"{pad}    result: {text}")
                walk(gid, depth + 1)

        walk(None, 0)
        return "\n".join(lines) if lines else "(no goals yet)"
