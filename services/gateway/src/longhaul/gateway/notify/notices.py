"""From an event of the log to the notices it makes: the one table of what people are told.

=====================  ==========================================================
kind                   made from
=====================  ==========================================================
run.completed          ``completed`` of a top-level trace; ``task_completed``
run.failed             ``failed`` of a top-level trace; ``task_failed``
run.stopped            ``stopped`` of a top-level trace
run.waiting            ``waiting`` {reason: human → question, approval, budget} of any trace
                       (a sub-agent's question needs a person too); ``plan_created``
                       {review: true} → plan_review
budget.nearly_spent    an assistant ``message_appended`` or a ``subtrace_finished``
                       after which a top-level trace's run has used at least the
                       lowest ``budget_ratio`` of its ``max_tokens`` or ``max_cost``
schedule.failed        ``schedule_failed``: a schedule's tick that started nothing
                       (the ticker writes the first of a row, a new reason, and the
                       one that pauses the schedule: ``status: paused``)
=====================  ==========================================================

Sub-traces and a task's step traces end inside their parent or task, which is what is
reported. The runs of an eval (``longhaul eval``) make no notice unless the eval asked
(``--notify``): a suite of 100 runs is one measurement, not 100 things to tell. A notice's
id is the event's id, or for a budget ``r<run>-<limit>``: one per run and limit, whichever
message crossed the line first. A run a schedule started names it (``schedule_id``) in each
of its notices. A kind with a new source is one more entry in
:data:`SOURCES` and one more branch in :meth:`NoticeSource.of`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Literal

from longhaul.core.consumer import Delivery
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.names import Names
from longhaul.domain.notify import BudgetInfo, Notice, NoticeKind, WaitInfo, WaitKind
from longhaul.domain.state import TaskState, TraceState
from longhaul.gateway.schedules.timing import rfc3339

SOURCES: dict[NoticeKind, tuple[tuple[Aggregate, str], ...]] = {
    "run.completed": (("trace", "completed"), ("task", "task_completed")),
    "run.failed": (("trace", "failed"), ("task", "task_failed")),
    "run.stopped": (("trace", "stopped"),),
    "run.waiting": (("trace", "waiting"), ("task", "plan_created")),
    "budget.nearly_spent": (("trace", "message_appended"), ("trace", "subtrace_finished")),
    "schedule.failed": (("schedule", "schedule_failed"),),
}
"""Which events each kind is made from: the notifier's consumer filters on these only."""

WAIT_KINDS: dict[str, WaitKind] = {"human": "question", "approval": "approval", "budget": "budget"}
TEXT_LIMIT = 1000
"""Summaries, errors and questions are cut to this many characters in a notice."""

OwnerOf = Callable[[TraceState], Coroutine[Any, Any, str | None]]


def subjects(names: Names, kinds: Iterable[NoticeKind]) -> list[str]:
    """The event subjects the notices of ``kinds`` are made from."""
    wanted = {source for kind in kinds for source in SOURCES[kind]}
    return sorted(names.type_filter(aggregate, event_type) for aggregate, event_type in wanted)


def _cut(text: str | None) -> str | None:
    if not text:
        return None
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"


def _top_level(state: TraceState) -> bool:
    return state.parent_trace_id is None and state.task_id is None


def _quiet(state: TraceState) -> bool:
    """An eval's run that was not asked to notify."""
    return state.eval is not None and not state.eval.notify


def trace_notice(event: ev.Event, state: TraceState, owner: str | None) -> Notice | None:
    """The notice a trace's ending or wait makes (``None``: nothing to tell)."""
    if _quiet(state):
        return None
    base: dict[str, Any] = {
        "id": event.id,
        "at": event.ts,
        "aggregate": "trace",
        "trace_id": state.trace_id,
        "owner": owner,
        "name": state.name,
        "schedule_id": state.schedule_id,
        "event_type": event.type,
    }
    if isinstance(event, ev.Waiting):
        wait = WAIT_KINDS.get(event.reason)
        if wait is None:
            return None
        tools = _pending_tools(state, event.pending_calls)
        info = WaitInfo(kind=wait, detail=_cut(event.detail) or "", tool_calls=tools)
        return Notice(kind="run.waiting", status="waiting", wait=info, **base)
    if not _top_level(state):
        return None
    if isinstance(event, ev.Completed):
        return Notice(kind="run.completed", status="completed", summary=_cut(event.summary), **base)
    if isinstance(event, ev.Failed):
        return Notice(
            kind="run.failed",
            status="failed",
            error=_cut(event.error),
            stop_reason=event.stop_reason,
            **base,
        )
    if isinstance(event, ev.Stopped):
        return Notice(kind="run.stopped", status="stopped", stop_reason=event.reason, **base)
    return None


def _pending_tools(state: TraceState, call_ids: list[str]) -> list[str]:
    """The tool names of the calls an approval waits for, from the assistant messages."""
    wanted = set(call_ids)
    names: list[str] = []
    for message in state.messages.values():
        for call in message.tool_calls or ():
            if call.id in wanted:
                names.append(call.name)
    return names


def budget_notices(
    event: ev.Event, state: TraceState, owner: str | None, ratio: float
) -> list[Notice]:
    """A notice per limit of which the run has used at least ``ratio``, while it runs."""
    if not _top_level(state) or _quiet(state) or state.status not in ("running", "waiting"):
        return []
    used = state.run_usage
    limits: tuple[tuple[Literal["max_tokens", "max_cost"], float, float | None], ...] = (
        ("max_tokens", float(used.tokens), state.config.max_tokens),
        ("max_cost", used.cost, state.config.max_cost),
    )
    return [
        Notice(
            id=f"r{state.runs}-{limit}",
            kind="budget.nearly_spent",
            at=event.ts,
            aggregate="trace",
            trace_id=state.trace_id,
            owner=owner,
            name=state.name,
            status=state.status,
            budget=BudgetInfo(limit=limit, used=spent, max=cap, ratio=spent / cap),
            event_type=event.type,
        )
        for limit, spent, cap in limits
        if cap and spent / cap >= ratio
    ]


def task_notice(event: ev.Event, state: TaskState) -> Notice | None:
    """The notice a task's end or its plan's review makes."""
    base: dict[str, Any] = {
        "id": event.id,
        "at": event.ts,
        "aggregate": "task",
        "task_id": state.task_id,
        "owner": state.owner,
        "name": _cut(state.goal),
        "schedule_id": state.schedule_id,
        "event_type": event.type,
    }
    if isinstance(event, ev.TaskCompleted):
        return Notice(kind="run.completed", status="completed", summary=_cut(event.summary), **base)
    if isinstance(event, ev.TaskFailed):
        return Notice(kind="run.failed", status="failed", error=_cut(event.error), **base)
    if isinstance(event, ev.PlanCreated) and event.review:
        info = WaitInfo(kind="plan_review", detail=f"{len(event.phases)} phase(s) proposed")
        return Notice(kind="run.waiting", status="awaiting_review", wait=info, **base)
    return None


def schedule_notice(event: ev.ScheduleFailed) -> Notice:
    """A tick that started nothing: the event carries all of it (the schedule may be gone).
    The one that paused the schedule says so (``status: paused``)."""
    error = f"{event.code}: {event.error}"
    if event.paused:
        error = f"paused after {event.failures} failed ticks in a row; {error}"
    return Notice(
        id=event.id,
        kind="schedule.failed",
        at=event.ts,
        aggregate="schedule",
        schedule_id=event.aggregate_id,
        owner=event.owner,
        name=event.name,
        status="paused" if event.paused else "failed",
        tick=rfc3339(event.tick_ms),
        error=_cut(error),
        event_type=event.type,
    )


class NoticeSource:
    """Reads what a delivered event needs (the aggregate's fold, the run's owner) and makes
    its notices. ``budget_ratio`` is the lowest any webhook asks for (``None``: none asks)."""

    def __init__(
        self,
        traces: Repository[TraceState],
        tasks: Repository[TaskState],
        owner_of: OwnerOf,
        budget_ratio: float | None,
    ) -> None:
        self.traces = traces
        self.tasks = tasks
        self.owner_of = owner_of
        self.budget_ratio = budget_ratio

    async def of(self, delivery: Delivery) -> list[Notice]:
        try:
            event = ev.decode(delivery.data)
        except ev.EventDecodeError:
            return []  # the folds record it as a fault; nothing to tell
        if isinstance(event, ev.ScheduleFailed):
            return [schedule_notice(event)]
        if delivery.aggregate == "task":
            task = await self.tasks.load(delivery.aggregate_id)
            notice = task_notice(event, task) if task.exists else None
            return [notice] if notice else []
        if isinstance(event, ev.MessageAppended) and (
            event.role != "assistant" or event.usage is None
        ):
            return []  # most of the log: decided without a fold
        state = await self.traces.load(delivery.aggregate_id)
        if not state.exists:
            return []  # erased meanwhile
        owner = await self.owner_of(state)
        if isinstance(event, ev.MessageAppended | ev.SubtraceFinished):
            if self.budget_ratio is None:
                return []
            return budget_notices(event, state, owner, self.budget_ratio)
        notice = trace_notice(event, state, owner)
        return [notice] if notice else []
