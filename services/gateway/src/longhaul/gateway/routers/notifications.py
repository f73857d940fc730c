"""``GET /api/traces/{id}/notifications`` and ``GET /api/tasks/{id}/notifications``: what
became of each notification a run made — delivered, still being retried (with the next
attempt's time and the last error) or given up. Owner-checked like every route: another key's
run is 404, exactly as an unknown one."""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi import APIRouter, Request
from longhaul.domain.notify import DeliveryRecord
from longhaul.gateway import access
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.runtime import Runtime, runtime_of
from longhaul.gateway.schemas.derived import view_of
from pydantic import BaseModel, create_model

DeliveryView = view_of(DeliveryRecord, name="NotificationDelivery")
NotificationList: type[BaseModel] = create_model(
    "NotificationList",
    items=(list[DeliveryView], ...),  # type: ignore[valid-type]
)

router = APIRouter(tags=["notifications"], responses=ERROR_RESPONSES)


async def _listing(runtime: Runtime, run_id: str) -> dict[str, Any]:
    async with runtime.nats_call():
        records = await runtime.service.deliveries.of_run(run_id)
    return {"items": [msgspec.to_builtins(record) for record in records]}


@router.get(
    "/api/traces/{trace_id}/notifications",
    response_model=NotificationList,
    summary="The notifications this trace made and what became of each delivery",
)
async def trace_notifications(
    trace_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    runtime = runtime_of(request.app)
    await access.require_trace_owner(runtime, principal, trace_id)
    return await _listing(runtime, trace_id)


for _prefix in ("/api/tasks", "/api/v1/tasks"):

    @router.get(
        f"{_prefix}/{{task_id}}/notifications",
        response_model=NotificationList,
        summary="The notifications this task made and what became of each delivery",
    )
    async def task_notifications(
        task_id: str, request: Request, principal: CurrentPrincipal
    ) -> dict[str, Any]:
        runtime = runtime_of(request.app)
        await access.require_task_owner(runtime, principal, task_id)
        return await _listing(runtime, task_id)
