"""Folded state → API views. Kept apart from the routes so the shapes live in one place."""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.core.index import TraceIndexEntry
from longhaul.core.state import Message, TaskState, TraceState
from longhaul.gateway.schemas.tasks import PhaseView, TaskView
from longhaul.gateway.schemas.traces import (
    GoalTreeView,
    GoalView,
    MessageView,
    SubTraceView,
    TotalsView,
    TraceSummary,
    TraceView,
)


def summary_of(entry: TraceIndexEntry) -> TraceSummary:
    return TraceSummary(
        trace_id=entry.trace_id,
        status=entry.status,
        name=entry.name,
        parent_trace_id=entry.parent_trace_id,
        task_id=entry.task_id,
        phase_id=entry.phase_id,
        head_sequence=entry.head_sequence,
        last_sequence=entry.last_sequence,
        totals=TotalsView(**msgspec.to_builtins(entry.totals)),
        error=entry.error,
        stop_reason=entry.stop_reason,
        created_at=entry.created_at,
        updated_at=entry.updated_at,
    )


def trace_view(state: TraceState) -> TraceView:
    goals = state.goals
    return TraceView(
        trace_id=state.trace_id,
        status=state.status or "running",
        name=state.name,
        parent_trace_id=state.parent_trace_id,
        task_id=state.task_id,
        phase_id=state.phase_id,
        head_sequence=state.head_sequence,
        last_sequence=state.last_sequence,
        totals=TotalsView(**msgspec.to_builtins(state.totals)),
        error=state.error,
        stop_reason=state.stop_reason,
        created_at=state.created_at,
        updated_at=state.updated_at,
        summary=state.summary,
        wait_reason=state.wait_reason,
        wait_detail=state.wait_detail,
        model=state.config.model,
        preset=state.config.preset,
        runs=state.runs,
        event_id=state.stream_seq,
        goal_tree=GoalTreeView(
            focus=goals.focus,
            goals=[
                GoalView(
                    id=goal.id, title=goal.title, parent_id=goal.parent_id,
                    status=goal.status, summary=goal.summary,
                )
                for goal in goals.snapshot()
            ],
        ),
        sub_traces=[
            SubTraceView(
                trace_id=info.child_trace_id, status=info.status, mode=info.mode,
                task=info.task, summary=info.summary, tool_call_id=info.tool_call_id,
            )
            for info in state.subtraces.values()
        ],
    )


_MESSAGE_FIELDS = tuple(MessageView.model_fields)


def message_view(message: Message) -> dict[str, Any]:
    """A :class:`MessageView`-shaped dict, built without pydantic: a long trace's messages
    are encoded straight from the fold (the route returns them with msgspec)."""
    data = msgspec.to_builtins(message)
    view = {name: data.get(name) for name in _MESSAGE_FIELDS}
    view["parent_sequence"] = message.parent_sequence
    view["branch_type"] = message.branch_type
    view["cost"] = message.cost
    view["duration_ms"] = message.duration_ms
    view["synthetic"] = message.synthetic
    view["created_at"] = message.created_at
    return view


def task_view(state: TaskState) -> TaskView:
    return TaskView(
        task_id=state.task_id,
        status=state.status or "planning",
        goal=state.goal,
        mode=state.mode,
        phases=[
            PhaseView(
                id=pid,
                name=phase.spec.name,
                description=phase.spec.description,
                depends_on=list(phase.spec.depends_on),
                status=phase.status,
                trace_ids=list(phase.trace_ids),
                attempts=phase.attempts,
                summary=phase.summary,
                output_ref=phase.output_ref,
                error=phase.error,
            )
            for pid, phase in ((pid, state.phases[pid]) for pid in state.order)
        ],
        replans=list(state.replans),
        resumes=state.resumes,
        summary=state.summary,
        error=state.error,
        created_at=state.created_at,
        updated_at=state.updated_at,
        event_id=state.stream_seq,
    )
