"""``POST /api/runs``: the client states a goal; the router picks a single agent (a trace) or
a planned team (a task) and the decision is recorded on the created aggregate's first event
(``route`` on ``trace_created`` / ``task_created``)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from longhaul.agent.planning.routing import route
from longhaul.domain import events as ev
from longhaul.gateway import commands
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.runs import CreateRunRequest, RouteView, RunAccepted
from longhaul.gateway.usecases.files import create_with_files
from longhaul.gateway.usecases.start import check_model

router = APIRouter(prefix="/api/runs", tags=["runs"], responses=ERROR_RESPONSES)


@router.post(
    "",
    status_code=202,
    summary="Run a goal: one agent or a planned team, chosen by its estimated complexity",
)
async def create_run(
    body: CreateRunRequest, runtime: CurrentRuntime, response: Response, principal: CurrentPrincipal
) -> RunAccepted:
    check_model(runtime, body.settings().model)
    # files go into one agent's working directory: a run with files is a trace
    files = [(f.name, f.content, f.media_type) for f in body.files]
    if files and body.mode == "task":
        raise ApiError(
            422, "invalid_request", "files go to a single agent: send mode trace or auto"
        )
    mode = "trace" if files else body.mode
    kind, decision = await route(
        body.goal, mode, runtime.utility_model(), runtime.config.pipeline.routing
    )
    if kind == "task":
        run_id, status, event_id = await _start_task(runtime, principal, body, decision)
    else:
        run_id, status, event_id = await _start_trace(runtime, principal, body, decision, files)
    response.headers["Location"] = f"/api/{kind}s/{run_id}"
    return RunAccepted(
        kind=kind,
        trace_id=run_id if kind == "trace" else None,
        task_id=run_id if kind == "task" else None,
        status=status,
        complexity=decision.complexity,
        reason=decision.reason,
        route=RouteView.of(decision),
        event_id=event_id,
    )


async def _start_task(
    runtime: Runtime, principal: Principal, body: CreateRunRequest, decision: ev.RouteDecision
) -> tuple[str, str, int]:
    """The task's id, status and first event's sequence."""
    settings = body.settings()
    options = {"model": settings.model} if settings.model else {}
    task = await commands.create_task(
        runtime,
        principal,
        ev.TaskCreated(
            goal=body.goal,
            options=options,
            review=body.review,
            route=decision,
            max_tokens=settings.max_tokens,
            max_cost=settings.max_cost,
        ),
    )
    return task.task_id, task.status or "planning", task.stream_seq


async def _start_trace(
    runtime: Runtime,
    principal: Principal,
    body: CreateRunRequest,
    decision: ev.RouteDecision,
    files: list[tuple[str, str, str | None]],
) -> tuple[str, str, int]:
    """The trace's id, status and first event's sequence."""
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content=body.goal)],
        config=body.settings().config(),
        name=body.name or " ".join(body.goal.split())[:60],
        untitled=not body.name,
        route=decision,
    )
    trace = await create_with_files(runtime, principal, created, files)
    return trace.trace_id, trace.status or "running", trace.stream_seq
