"""Folded state → API views. Kept apart from the routes so the shapes live in one place."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from longhaul.core.index import TraceIndexEntry
from longhaul.domain.events import Goal, RouteDecision, ToolDecided
from longhaul.domain.state import Message, SubtraceInfo, TaskState, TraceState
from longhaul.domain.state.collaborators import collaborators
from longhaul.domain.state.goals import ROOT, GoalStats, GoalTree
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.schemas.runs import RouteView
from longhaul.gateway.schemas.tasks import MergeView, PhaseView, TaskView
from longhaul.gateway.schemas.traces import (
    BudgetView,
    CollaboratorView,
    ContextView,
    CutOffEffectView,
    FaultView,
    GoalStatsView,
    GoalTreeView,
    GoalView,
    MessageView,
    ModelSwitchView,
    PendingCallView,
    RunUsageView,
    SubTraceView,
    TotalsView,
    TraceSummary,
    TraceView,
    WaitingBelowView,
)

_SUMMARY_FIELDS = tuple(f for f in TraceSummary.model_fields if f != "waiting_below")


def _summary_fields(entry: TraceIndexEntry, mirror: IndexMirror) -> dict[str, Any]:
    """The :class:`TraceSummary` part of a view: the index entry's fields of the same names,
    and the waits below it from the index mirror."""
    fields = {name: getattr(entry, name) for name in _SUMMARY_FIELDS}
    fields["totals"] = TotalsView(**msgspec.to_builtins(entry.totals))
    fields["waiting_below"] = waiting_below(mirror, entry.trace_id)
    return fields


def waiting_below(mirror: IndexMirror, trace_id: str) -> list[WaitingBelowView]:
    return [
        WaitingBelowView(
            trace_id=e.trace_id,
            parent_trace_id=e.parent_trace_id,
            name=e.name,
            reason=e.wait_reason,
        )
        for e in mirror.waiting_below(trace_id)
    ]


def summary_of(entry: TraceIndexEntry, mirror: IndexMirror) -> TraceSummary:
    return TraceSummary(**_summary_fields(entry, mirror))


def _child_view(info: SubtraceInfo, mirror: IndexMirror) -> SubTraceView:
    """A child as its parent recorded it, with its current status from the index while the
    parent's log still says it runs (a child waiting for a person is not "running")."""
    status, wait_reason = info.status, None
    live = mirror.entries.get(info.child_trace_id)
    if info.status == "running" and live is not None:
        status, wait_reason = live.status, live.wait_reason
    return SubTraceView(
        trace_id=info.display_id,
        remote=info.remote,
        status=status,
        wait_reason=wait_reason,
        mode=info.mode,
        task=info.task,
        summary=info.summary,
        tool_call_id=info.tool_call_id,
    )


def trace_view(
    state: TraceState,
    mirror: IndexMirror,
    max_iterations: int,
    parent: TraceState | None = None,
    task: TaskState | None = None,
) -> TraceView:
    """``max_iterations``: the limit that applies (``Runtime.max_iterations``); ``parent`` (a
    sub-trace's) or ``task`` (a step trace's): for the collaborators (siblings)."""
    goals = state.goals
    return TraceView(
        **_summary_fields(TraceIndexEntry.from_state(state), mirror),
        summary=state.summary,
        route=_route(state.route),
        eval=None if state.eval is None else msgspec.to_builtins(state.eval),
        schedule_id=state.schedule_id,
        trigger_id=state.trigger_id,
        context=ContextView.model_validate(msgspec.to_builtins(state.context))
        if state.context
        else None,
        fault_log=[
            FaultView(stream_seq=f.stream_seq, type=f.type, error=f.error) for f in state.faults
        ],
        pending_client_calls=[
            PendingCallView(
                tool_call_id=call.id, name=call.function.name, arguments=call.function.arguments
            )
            for call in state.unanswered_tool_calls()
            if call.id in state.client_pending
        ],
        pending_approvals=[
            PendingCallView(
                tool_call_id=call.id,
                name=call.function.name,
                arguments=call.function.arguments,
                outcome_unknown=call.id in state.ledger,
            )
            for call in state.unanswered_tool_calls()
            if call.id in state.approval_pending
        ],
        cut_off_effects=_cut_off_effects(state),
        wait_detail=state.wait_detail,
        model=state.config.model,
        model_switches=[
            ModelSwitchView.model_validate(msgspec.structs.asdict(switch))
            for switch in state.model_switches
        ],
        preset=state.config.preset,
        runs=state.runs,
        run_usage=RunUsageView.model_validate(msgspec.structs.asdict(state.run_usage)),
        budget=BudgetView(
            max_iterations=max_iterations,
            max_tokens=state.config.max_tokens,
            max_cost=state.config.max_cost,
        ),
        event_id=state.stream_seq,
        goal_tree=goal_tree(goals, completed=state.status == "completed"),
        sub_traces=[_child_view(info, mirror) for info in state.subtraces.values()],
        messaging=state.config.messaging,
        unread_messages=len(state.unread_messages()),
        collaborators=[
            CollaboratorView.model_validate(msgspec.to_builtins(c))
            for c in collaborators(state, parent, task)
        ],
    )


_MESSAGE_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in MessageView.model_fields.items()
}


def message_view(message: Message) -> dict[str, Any]:
    """A :class:`MessageView`-shaped dict, built without pydantic: a long trace's messages
    are encoded straight from the fold (the route returns them with msgspec)."""
    data = msgspec.to_builtins(message)
    view = {name: data.get(name, default) for name, default in _MESSAGE_DEFAULTS.items()}
    view["created_at"] = message.ts
    return view


def goal_tree(goals: GoalTree, *, completed: bool) -> GoalTreeView:
    """The plan with what each goal cost, by itself and with everything under it. The root
    goal ends with the trace: a completed trace's is done (the fold keeps it open, since a
    new run of the trace goes on under it), and then nothing is in focus."""
    cumulative = goals.cumulative()

    def status(goal: Goal) -> Goal:
        if completed and goal.id == ROOT and goal.status == "in_progress":
            return msgspec.structs.replace(goal, status="done")
        return goal

    def stats(value: GoalStats | None) -> GoalStatsView:
        return GoalStatsView() if value is None else GoalStatsView(**msgspec.to_builtins(value))

    return GoalTreeView(
        focus=None if completed and goals.focus == ROOT else goals.focus,
        goals=[
            GoalView(
                **msgspec.structs.asdict(status(goal)),
                self_stats=stats(goals.stats.get(goal.id)),
                cumulative_stats=stats(cumulative.get(goal.id)),
            )
            for goal in goals.snapshot()
        ],
    )


def _route(decision: RouteDecision | None) -> RouteView | None:
    return None if decision is None else RouteView.of(decision)


def task_view(state: TaskState) -> TaskView:
    return TaskView(
        fault_log=[
            FaultView(stream_seq=f.stream_seq, type=f.type, error=f.error) for f in state.faults
        ],
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
                preset=phase.spec.preset,
                tools=phase.spec.tools,
                criteria=list(phase.spec.criteria),
                model=phase.spec.model,
                status=phase.status,
                trace_ids=list(phase.trace_ids),
                attempts=phase.attempts,
                summary=phase.summary,
                output_ref=phase.output_ref,
                error=phase.error,
                merge=MergeView.model_validate(msgspec.to_builtins(phase.merge))
                if phase.merge
                else None,
                competitors=len(phase.spec.competitors),
                merge_strategy=phase.spec.merge if phase.spec.competitors else None,
            )
            for pid, phase in ((pid, state.phases[pid]) for pid in state.order)
        ],
        plan_source=state.plan_source,
        review_reason=state.review_reason,
        route=_route(state.route),
        schedule_id=state.schedule_id,
        trigger_id=state.trigger_id,
        max_tokens=state.max_tokens,
        max_cost=state.max_cost,
        replans=list(state.replans),
        resumes=state.resumes,
        resumes_handled=state.resumes_handled,
        resume_source=state.resume_source,
        summary=state.summary,
        error=state.error,
        created_at=state.created_at,
        updated_at=state.updated_at,
        event_id=state.stream_seq,
    )


def _cut_off_effects(state: TraceState) -> list[CutOffEffectView]:
    cut_off = [effect for effect in state.ledger.effects.values() if effect.cut_off]
    if not cut_off:
        return []
    answered = {m.tool_call_id for m in state.messages.values() if m.role == "tool"}
    decisions = state.tool_decisions
    views = []
    for effect in cut_off:
        started = effect.started
        decided = decisions.get(started.tool_call_id)
        asked = any(r.resolution == "asked" for r in effect.resumed)
        views.append(
            CutOffEffectView(
                tool_call_id=started.tool_call_id,
                tool=started.tool,
                effects=started.effects,
                idempotency_key=started.idempotency_key,
                resolutions=[r.resolution for r in effect.resumed],
                decision=_decision(decided) if asked and decided is not None else None,
                settled=started.tool_call_id in answered,
            )
        )
    return views


def _decision(decided: ToolDecided) -> Literal["run_again", "took_effect", "failed"]:
    if decided.took_effect:
        return "took_effect"
    return "run_again" if decided.approved else "failed"
