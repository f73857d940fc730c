"""Who a trace works with: its parent, its sub-traces, its siblings, and a person it asked.

Derived from the trace's fold and its parent's (siblings are the parent's other sub-traces;
a task's step trace has no parent, and its siblings are the step traces of the task's other
phases, read from the task's fold), so the context injection, ``send_message`` and
``GET /api/traces/{id}`` agree on the list without a separate record to keep current: the
``agent`` tool, ``ask_human``, the children's ends and the task's phases already are on the
logs.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from longhaul.domain.state.task import TaskState
from longhaul.domain.state.trace import TraceState

SUMMARY_CHARS = 500
"""A collaborator's summary as listed (the model's reminder of what a helper found)."""


class Collaborator(msgspec.Struct, kw_only=True):
    name: str
    """``parent``, ``human``, or the trace id of a sub-trace or sibling."""
    type: Literal["agent", "human"]
    trace_id: str | None
    status: str
    summary: str = ""


def is_step_trace(state: TraceState) -> bool:
    """A task's step trace: its siblings are in the task's fold, not a parent's."""
    return state.parent_trace_id is None and state.task_id is not None


def collaborators(
    state: TraceState, parent: TraceState | None = None, task: TaskState | None = None
) -> list[Collaborator]:
    """Parent (if ``parent`` is given), its sub-traces, siblings (the parent's other
    sub-traces, or with ``task`` the step traces of the task's phases), and ``human`` while
    the trace waits on a person."""
    found: list[Collaborator] = []
    if parent is not None and parent.exists:
        found.append(
            Collaborator(
                name="parent",
                type="agent",
                trace_id=parent.trace_id,
                status=parent.status or "running",
                summary=parent.name or "",
            )
        )
    for info in state.subtraces.values():
        found.append(_sub(info.display_id, info.status, info.task, info.summary))
    if parent is not None:
        for info in parent.subtraces.values():
            if info.child_trace_id != state.trace_id:
                found.append(_sub(info.child_trace_id, info.status, info.task, info.summary))
    if task is not None and task.task_id == state.task_id:
        for phase_id in task.order:
            phase = task.phases[phase_id]
            about = f"phase {phase_id}: {phase.spec.name}"
            for trace_id in phase.trace_ids:
                if trace_id != state.trace_id:
                    found.append(_sub(trace_id, phase.status, about, phase.summary))
    if state.wait_reason == "human":
        found.append(
            Collaborator(
                name="human", type="human", trace_id=None, status="asked", summary=state.wait_detail
            )
        )
    return found


def _sub(trace_id: str, status: str, task: str, summary: str) -> Collaborator:
    return Collaborator(
        name=trace_id,
        type="agent",
        trace_id=trace_id,
        status=status,
        summary=(summary or task)[:SUMMARY_CHARS],
    )


def reachable(
    state: TraceState, parent: TraceState | None, to: str, task: TaskState | None = None
) -> str | None:
    """The trace id ``to`` (``parent`` or a trace id) names among the agents ``state`` may
    message, else ``None``."""
    for item in collaborators(state, parent, task):
        if item.type == "agent" and to in (item.name, item.trace_id):
            return item.trace_id
    return None
