"""``/api/tasks`` (also ``/api/v1/tasks``): plan jobs. The gateway appends ``task_created`` /
``resume_requested``; the planner reacts, and progress arrives as task events."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from longhaul.agent.planning.quality import plan_issues
from longhaul.agent.planning.schema import InvalidPlan, parse_phases
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.tools.builtin import builtin_tools
from longhaul.domain import events as ev
from longhaul.domain.config import LonghaulConfig
from longhaul.domain.events import PhaseSpec
from longhaul.gateway import access, commands, erasure
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.routers.trace_events import SSE_DOC, StreamFrom, sse_response
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
from longhaul.gateway.verification import verification_problems
from longhaul.gateway.views import task_view
from longhaul.llm.registry import check_model_string


def check_task_options(config: LonghaulConfig, options: dict[str, Any]) -> None:
    """Phases given by the client may name operator checks, never carry commands, and name
    only models a run could use (no script outside models.scripted_dir): else 422."""
    phases = options.get("phases")
    phases = (
        [phase for phase in phases if isinstance(phase, dict)] if isinstance(phases, list) else []
    )
    errors = [
        f"options.phases[{index}].{error}"
        for index, phase in enumerate(phases)
        for error in verification_problems(phase.get("verification"), config.verifier.commands)
    ]
    if errors:
        raise ApiError(422, "invalid_verification", "; ".join(errors))
    for model in _models(options, phases):
        try:
            check_model_string(model, config.models)
        except ValueError as exc:
            raise ApiError(422, "invalid_model", str(exc)) from None


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


def _models(options: dict[str, Any], phases: list[dict[str, Any]]) -> list[str]:
    """Every model string a task's options name: the task's, its phases', their
    competitors' and their judges'."""
    found: list[Any] = [options.get("model")]
    for phase in phases:
        found.append(phase.get("model"))
        competitors = phase.get("competitors")
        if isinstance(competitors, list):
            found += [c.get("model") for c in competitors if isinstance(c, dict)]
        verification = phase.get("verification")
        judge = verification.get("judge") if isinstance(verification, dict) else None
        if isinstance(judge, dict):
            found.append(judge.get("model"))
    return [model for model in found if isinstance(model, str)]


def task_creation(config: LonghaulConfig, body: CreateTaskRequest) -> ev.TaskCreated:
    """The ``task_created`` event a create body asks for (phases' checks and models checked):
    the one way every surface (this API, schedules, triggers) starts a task."""
    check_task_options(config, body.options)
    return ev.TaskCreated(
        goal=body.goal,
        mode=body.mode,
        options=body.options,
        review=body.review,
        max_tokens=body.max_tokens,
        max_cost=body.max_cost,
    )


def build_tasks_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=["tasks"], responses=ERROR_RESPONSES)

    @router.post("", status_code=202, response_model=TaskAccepted, summary="Start a task")
    async def create_task(
        body: CreateTaskRequest,
        request: Request,
        response: Response,
        principal: CurrentPrincipal,
    ) -> TaskAccepted:
        runtime = runtime_of(request.app)
        event = task_creation(runtime.config, body)
        state = await commands.create_task(runtime, principal, event)
        response.headers["Location"] = f"{prefix}/{state.task_id}"
        return TaskAccepted(
            task_id=state.task_id, status=state.status or "planning", event_id=state.stream_seq
        )

    @router.get("", response_model=TaskList, summary="List your tasks, newest first")
    async def list_tasks(
        request: Request,
        principal: CurrentPrincipal,
        limit: Annotated[int, Query(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, Query(max_length=128)] = None,
    ) -> TaskList:
        runtime = runtime_of(request.app)
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

    @router.get("/{task_id}", response_model=TaskView, summary="A task with its phases")
    async def get_task(task_id: str, request: Request, principal: CurrentPrincipal) -> TaskView:
        return task_view(await access.owned_task(runtime_of(request.app), principal, task_id))

    @router.post(
        "/{task_id}/resume",
        status_code=202,
        response_model=TaskAccepted,
        summary="Resume a failed or interrupted task from its checkpoints",
    )
    async def resume_task(
        task_id: str, request: Request, principal: CurrentPrincipal
    ) -> TaskAccepted:
        state, recorded = await commands.append_to_task(
            runtime_of(request.app), principal, task_id, ev.ResumeRequested()
        )
        return TaskAccepted(
            task_id=task_id, status=state.status or "planning", event_id=recorded.seq
        )

    @router.post(
        "/{task_id}/plan",
        status_code=202,
        response_model=TaskAccepted,
        summary="Approve, edit or refuse a plan waiting for review (status awaiting_review)",
    )
    async def review_plan(
        task_id: str, body: ReviewPlanRequest, request: Request, principal: CurrentPrincipal
    ) -> TaskAccepted:
        runtime = runtime_of(request.app)
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
        response_model=CheckpointList,
        summary="The saved results of the task's completed phases (what a resume starts from)",
    )
    async def list_checkpoints(
        task_id: str, request: Request, principal: CurrentPrincipal
    ) -> CheckpointList:
        runtime = runtime_of(request.app)
        await access.require_task_owner(runtime, principal, task_id)
        async with runtime.nats_call():
            saved = await runtime.service.checkpoints.list(task_id)
        return CheckpointList(
            checkpoints=[
                CheckpointView(
                    phase_id=c.phase_id,
                    name=c.name,
                    summary=c.summary,
                    result_ref=c.result_ref,
                    trace_id=c.trace_id,
                    saved_at=c.saved_at,
                )
                for c in saved
            ]
        )

    @router.delete(
        "/{task_id}",
        response_model=TaskDeleted,
        summary="Delete an ended task with its step traces everywhere they are stored",
    )
    async def delete_task(
        task_id: str, request: Request, principal: CurrentPrincipal
    ) -> TaskDeleted:
        """Its events, snapshot, checkpoints, phase outputs, its step traces (as a trace's
        delete erases them) and its working directory. A task still planning or running is
        409: it can be deleted once it has ended."""
        return TaskDeleted.model_validate(
            await erasure.erase_owned_task(runtime_of(request.app), principal, task_id)
        )

    @router.delete(
        "/{task_id}/checkpoints",
        response_model=CheckpointsCleared,
        summary="Clear the task's checkpoints (a resume then reads completed phases from the log)",
    )
    async def clear_checkpoints(
        task_id: str, request: Request, principal: CurrentPrincipal
    ) -> CheckpointsCleared:
        runtime = runtime_of(request.app)
        await access.require_task_owner(runtime, principal, task_id)
        async with runtime.nats_call():
            cleared = await runtime.service.checkpoints.clear(task_id)
        return CheckpointsCleared(task_id=task_id, cleared=cleared)

    @router.get(
        "/{task_id}/events",
        response_class=StreamingResponse,
        responses=SSE_DOC,
        summary="Server-sent events of a task (plan, phases, replans, completion)",
    )
    async def task_events(
        task_id: str, request: Request, principal: CurrentPrincipal, start: StreamFrom
    ) -> StreamingResponse:
        runtime = runtime_of(request.app)
        await access.require_task_owner(runtime, principal, task_id)
        return sse_response(runtime, "task", task_id, start, request)

    return router
