"""``/api/tasks`` (also ``/api/v1/tasks``): plan jobs. The gateway appends ``task_created`` /
``resume_requested``; the planner reacts, and progress arrives as task events."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from longhaul.agent.planning.quality import plan_issues
from longhaul.agent.planning.schema import InvalidPlan, parse_phases
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.tools.builtin import builtin_tools
from longhaul.domain import events as ev
from longhaul.domain.events import PhaseSpec
from longhaul.gateway import access, commands
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime, OwnedTask, OwnedTaskId
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.runtime import runtime_of
from longhaul.gateway.schemas.tasks import (
    ApprovePlan,
    CheckpointList,
    CheckpointsCleared,
    CheckpointView,
    CreateTaskRequest,
    ReviewPlanRequest,
    TaskAccepted,
    TaskDeleted,
    TaskList,
    TaskSummary,
    TaskView,
)
from longhaul.gateway.sse import SSE_ROUTE, StreamFrom, sse_response
from longhaul.gateway.usecases import erase
from longhaul.gateway.usecases.tasks import check_task_options, task_creation
from longhaul.gateway.views import task_view


def _reviewed_phases(request: Request, goal: str, raw: list[dict[str, Any]]) -> list[PhaseSpec]:
    """An edited plan passes every check a model's plan passes (schema, graph, operator
    checks and models, the quality self-check), else 422 ``invalid_plan`` listing them."""
    config = runtime_of(request.app).config
    check_task_options(config, {"phases": raw})
    try:
        specs = parse_phases(raw, max_phases=config.pipeline.max_phases)
    except InvalidPlan as exc:
        raise ApiError(422, "invalid_plan", str(exc)) from None
    issues = plan_issues(
        specs,
        goal,
        presets=PresetCatalog(config.presets).names(),
        tools=builtin_tools().names(),
    )
    if issues:
        raise ApiError(422, "invalid_plan", "; ".join(issues), {"issues": issues})
    return specs


def build_tasks_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=["tasks"], responses=ERROR_RESPONSES)

    @router.post("", status_code=202, response_model=TaskAccepted, summary="Start a task")
    async def create_task(
        body: CreateTaskRequest,
        runtime: CurrentRuntime,
        response: Response,
        principal: CurrentPrincipal,
    ) -> TaskAccepted:
        event = task_creation(runtime.config, body)
        state = await commands.create_task(runtime, principal, event)
        response.headers["Location"] = f"{prefix}/{state.task_id}"
        return TaskAccepted(
            task_id=state.task_id, status=state.status or "planning", event_id=state.stream_seq
        )

    @router.get("", response_model=TaskList, summary="List your tasks, newest first")
    async def list_tasks(
        runtime: CurrentRuntime,
        principal: CurrentPrincipal,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, Query(max_length=128)] = None,
    ) -> TaskList:
        page: list[TaskSummary] = []
        for task_id in await access.task_ids(runtime):
            if cursor is not None and task_id >= cursor:
                continue
            async with runtime.nats_call():
                created = await access.first_event(runtime, "task", task_id)
            if not isinstance(created, ev.TaskCreated) or created.owner != principal.owner:
                continue
            if len(page) == limit:
                return TaskList(tasks=page, next_cursor=page[-1].task_id)
            async with runtime.nats_call():
                state = await runtime.tasks.load(task_id)
            page.append(
                TaskSummary(
                    task_id=task_id,
                    status=state.status or "planning",
                    goal=state.goal,
                    mode=state.mode,
                    phases=len(state.order),
                    phases_completed=sum(
                        1 for phase in state.phases.values() if phase.status == "completed"
                    ),
                    error=state.error,
                    created_at=state.created_at,
                    updated_at=state.updated_at,
                )
            )
        return TaskList(tasks=page)

    @router.get("/{task_id}", summary="A task with its phases")
    async def get_task(task: OwnedTask) -> TaskView:
        return task_view(task)

    @router.post(
        "/{task_id}/resume",
        status_code=202,
        summary="Resume a failed or interrupted task from its checkpoints",
    )
    async def resume_task(
        task_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
    ) -> TaskAccepted:
        state, recorded = await commands.append_to_task(
            runtime, principal, task_id, ev.ResumeRequested()
        )
        return TaskAccepted(
            task_id=task_id, status=state.status or "planning", event_id=recorded.seq
        )

    @router.post(
        "/{task_id}/plan",
        status_code=202,
        summary="Approve, edit or refuse a plan waiting for review (status awaiting_review)",
    )
    async def review_plan(
        task_id: str,
        body: ReviewPlanRequest,
        request: Request,
        runtime: CurrentRuntime,
        principal: CurrentPrincipal,
    ) -> TaskAccepted:
        task = await access.owned_task(runtime, principal, task_id)  # another key's: 404
        if task.status != "awaiting_review":
            raise ApiError(409, "conflict", f"task {task_id} is {task.status}, not awaiting_review")
        phases = None
        if isinstance(body, ApprovePlan) and body.phases is not None:
            phases = _reviewed_phases(request, task.goal, body.phases)
        state, recorded = await commands.append_to_task(
            runtime,
            principal,
            task_id,
            ev.PlanReviewed(approved=body.approved, phases=phases, reason=body.reason),
        )
        return TaskAccepted(
            task_id=task_id, status=state.status or "planning", event_id=recorded.seq
        )

    @router.get(
        "/{task_id}/checkpoints",
        summary="The saved results of the task's completed phases (what a resume starts from)",
    )
    async def list_checkpoints(task_id: OwnedTaskId, runtime: CurrentRuntime) -> CheckpointList:
        async with runtime.nats_call():
            saved = await runtime.service.checkpoints.list(task_id)
        return CheckpointList(
            checkpoints=[CheckpointView.model_validate(msgspec.structs.asdict(c)) for c in saved]
        )

    @router.delete(
        "/{task_id}",
        summary="Delete an ended task with its step traces everywhere they are stored",
    )
    async def delete_task(
        task_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
    ) -> TaskDeleted:
        """Its events, snapshot, checkpoints, phase outputs, its step traces (as a trace's
        delete erases them) and its working directory. A task still planning or running is
        409: it can be deleted once it has ended."""
        return TaskDeleted.model_validate(await erase.erase_owned_task(runtime, principal, task_id))

    @router.delete(
        "/{task_id}/checkpoints",
        summary="Clear the task's checkpoints (a resume then reads completed phases from the log)",
    )
    async def clear_checkpoints(
        task_id: OwnedTaskId, runtime: CurrentRuntime
    ) -> CheckpointsCleared:
        async with runtime.nats_call():
            cleared = await runtime.service.checkpoints.clear(task_id)
        return CheckpointsCleared(task_id=task_id, cleared=cleared)

    @router.get(
        "/{task_id}/events",
        summary="Server-sent events of a task (plan, phases, replans, completion)",
        **SSE_ROUTE,
    )
    async def task_events(
        task_id: OwnedTaskId, request: Request, runtime: CurrentRuntime, start: StreamFrom
    ) -> StreamingResponse:
        return sse_response(runtime, "task", task_id, start, request)

    return router


# Built once at import, like the other routers: building one costs ~30 ms of FastAPI route
# analysis, which every app would pay again.
router = build_tasks_router("/api/tasks")
versioned_router = build_tasks_router("/api/v1/tasks")
