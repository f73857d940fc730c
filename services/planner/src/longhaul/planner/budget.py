"""A task's own caps: ``max_tokens`` / ``max_cost`` over the sum of its step traces.

What the traces used is read from their logs (totals of every step trace any plan started,
replanned ones included). Each new step trace is created with what is left as its own
``max_tokens`` / ``max_cost``, so one running phase cannot spend past the cap by itself; when
a step trace ends and the sum is over, the planner stops the task's live step traces
(``stop_requested``, reason ``task_budget``) and fails the task with the figures. Phases
running side by side may together overshoot by what they use before the first of them ends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.budget import over_budget
from longhaul.domain.state import TaskState, TraceState

STOP_REASON = "task_budget"


@dataclass(frozen=True)
class Usage:
    tokens: int = 0
    cost: float = 0.0


def capped(task: TaskState) -> bool:
    return task.max_tokens is not None or task.max_cost is not None


async def usage(traces: Repository[TraceState], task: TaskState) -> Usage:
    states = await asyncio.gather(*(traces.load(t) for t in task.step_traces))
    return Usage(
        tokens=sum(s.totals.prompt_tokens + s.totals.completion_tokens for s in states),
        cost=sum(s.totals.cost for s in states),
    )


def overrun(task: TaskState, used: Usage) -> str | None:
    """Why the task is over its caps, or ``None``."""
    cap = over_budget(task, used.tokens, used.cost)
    if cap == "max_tokens":
        return f"task max_tokens exceeded: its step traces used {used.tokens} of {task.max_tokens}"
    if cap == "max_cost":
        return f"task max_cost exceeded: its step traces used ${used.cost:.4f} of ${task.max_cost}"
    return None


def left(task: TaskState, used: Usage) -> tuple[int | None, float | None]:
    """What a new step trace may still use: ``(max_tokens, max_cost)``."""
    tokens = None if task.max_tokens is None else max(1, task.max_tokens - used.tokens)
    cost = None if task.max_cost is None else max(0.0, task.max_cost - used.cost)
    return tokens, cost


async def stop_live_steps(traces: Repository[TraceState], task: TaskState) -> None:
    """Ask every live step trace of the running phases to stop (once each)."""

    def decide(state: TraceState) -> list[ev.TraceEvent]:
        if not state.exists or state.is_final or state.stop_requested:
            return []
        return [ev.StopRequested(reason=STOP_REASON)]

    for pid in task.running_phases():
        for trace_id in task.phases[pid].trace_ids:
            state = await traces.load(trace_id)
            await traces.save(trace_id, state, decide, actor="planner")
