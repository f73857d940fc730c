"""``GET /api/inbox``: every question, approval, budget wait and plan review waiting for a
person across the caller's runs, oldest first, each with what is needed to answer it in place
(through ``/reply``, ``/approve``, ``/budget`` and ``/api/tasks/{id}/plan``).

Cheap by construction: trace waits come from the gateway's index mirror (each waiting
entry carries its question or pending calls, deadline and start, see
``longhaul.core.index.PersonWait``), so no trace is replayed; plan reviews from the stream's
subject counts (``longhaul.gateway.plan_reviews``). (``routers/inbox.py`` is something else:
messages *to* a running trace.)
"""

from __future__ import annotations

import msgspec
from fastapi import APIRouter, Request
from longhaul.domain.state import TaskState
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.plan_reviews import PlanReviews
from longhaul.gateway.schemas.waiting import InboxItem, InboxView, PlanPhaseView
from longhaul.gateway.usecases.listing import ready_mirror

router = APIRouter(prefix="/api/inbox", tags=["inbox"], responses=ERROR_RESPONSES)


def _arguments(text: str, truncated: bool) -> object:
    if truncated:
        return text
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


def trace_items(mirror: IndexMirror, owner: str) -> list[InboxItem]:
    """The caller's traces waiting on a person: one item per question, one per pending call."""
    items: list[InboxItem] = []
    for trace_id in list(mirror.waiting_on_people):
        entry = mirror.entries[trace_id]
        wait = entry.person_wait
        if wait is None or mirror.owner_of(entry) != owner:
            continue
        base = InboxItem(
            kind="question",
            trace_id=entry.trace_id,
            task_id=entry.task_id,
            since=wait.since,
            name=entry.name,
            deadline=wait.deadline,
            on_deadline=wait.on_deadline,
        )
        if entry.wait_reason in ("human", "budget"):
            kind = "question" if entry.wait_reason == "human" else "budget"
            update = {"kind": kind, "question": wait.question, "truncated": wait.truncated}
            items.append(base.model_copy(update=update))
        items.extend(
            base.model_copy(
                update={
                    "kind": "approval",
                    "tool_call_id": call.tool_call_id,
                    "tool": call.name,
                    "arguments": _arguments(call.arguments, call.truncated),
                    "truncated": call.truncated,
                    "outcome_unknown": call.outcome_unknown,
                }
            )
            for call in wait.calls
        )
    return items


def plan_item(task: TaskState) -> InboxItem:
    return InboxItem(
        kind="plan_review",
        trace_id=None,
        task_id=task.task_id,
        since=task.updated_at,
        name=task.goal,
        goal=task.goal,
        phases=[
            PlanPhaseView(
                id=pid,
                name=task.phases[pid].spec.name,
                description=task.phases[pid].spec.description,
                depends_on=task.phases[pid].spec.depends_on,
            )
            for pid in task.order
        ],
    )


@router.get("", summary="Every question, approval and plan review waiting for you, oldest first")
async def list_inbox(
    request: Request, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> InboxView:
    mirror = await ready_mirror(runtime)
    items = trace_items(mirror, principal.owner)
    reviews = getattr(request.app.state, "plan_reviews", None)
    if reviews is None:
        reviews = request.app.state.plan_reviews = PlanReviews()
    items += [plan_item(task) for task in await reviews.awaiting(runtime, principal.owner)]
    items.sort(key=lambda item: (item.since, item.trace_id or item.task_id or ""))
    return InboxView(items=items, count=len(items))
