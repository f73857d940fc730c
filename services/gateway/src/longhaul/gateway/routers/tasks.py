"""``/api/tasks`` (also ``/api/v1/tasks``): plan jobs. The gateway appends ``task_created`` /
``resume_requested``; the planner reacts, and progress arrives as task events."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from longhaul.domain import events as ev
from longhaul.gateway import access, commands
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.routers.trace_events import SSE_DOC, StreamFrom, sse_response
from longhaul.gateway.runtime import runtime_of
from longhaul.gateway.schemas.tasks import CreateTaskRequest, TaskAccepted, TaskView
from longhaul.gateway.views import task_view


def tasks_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=prefix, tags=["tasks"], responses=ERROR_RESPONSES)

    @router.post("", status_code=202, response_model=TaskAccepted, summary="Start a task")
    async def create_task(
        body: CreateTaskRequest,
        request: Request,
        response: Response,
        principal: CurrentPrincipal,
    ) -> TaskAccepted:
        event = ev.TaskCreated(goal=body.goal, mode=body.mode, options=body.options)
        state = await commands.create_task(runtime_of(request.app), principal, event)
        response.headers["Location"] = f"{prefix}/{state.task_id}"
        return TaskAccepted(
            task_id=state.task_id, status=state.status or "planning", event_id=state.stream_seq
        )

    @router.get("/{task_id}", response_model=TaskView, summary="A task with its phases")
    async def get_task(task_id: str, request: Request, principal: CurrentPrincipal) -> TaskView:
        return task_view(await access.load_task(runtime_of(request.app), principal, task_id))

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
