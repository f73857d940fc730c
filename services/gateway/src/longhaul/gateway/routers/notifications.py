"""``GET /api/traces/{id}/notifications``, ``GET /api/tasks/{id}/notifications`` and
``GET /api/schedules/{id}/notifications`` (its failed ticks): what became of each notification
a run or a schedule made — delivered, still being retried (with the next
attempt's time and the last error) or given up. Owner-checked like every route: another key's
run is 404, exactly as an unknown one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from longhaul.domain.notify import DeliveryRecord
from longhaul.gateway import access
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.runtime import runtime_of
from longhaul.gateway.schemas.derived import view_of
from pydantic import BaseModel, create_model

DeliveryView = view_of(DeliveryRecord, name="NotificationDelivery")
NotificationList: type[BaseModel] = create_model(
    "NotificationList",
    items=(list[DeliveryView], ...),  # type: ignore[valid-type]
)

router = APIRouter(tags=["notifications"], responses=ERROR_RESPONSES)


OWNER_CHECKS = {
    "trace": access.require_trace_owner,
    "task": access.require_task_owner,
    "schedule": access.require_schedule_owner,
}
ROUTES = (
    ("/api/traces/{run_id}/notifications", "trace"),
    ("/api/tasks/{run_id}/notifications", "task"),
    ("/api/v1/tasks/{run_id}/notifications", "task"),
    ("/api/schedules/{run_id}/notifications", "schedule"),
)


def _listing(aggregate: str) -> Callable[..., Awaitable[dict[str, Any]]]:
    check = OWNER_CHECKS[aggregate]

    async def listing(run_id: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
        runtime = runtime_of(request.app)
        await check(runtime, principal, run_id)
        async with runtime.nats_call():
            records = await runtime.service.notification_records.of_run(run_id)
        return {"items": [msgspec.to_builtins(record) for record in records]}

    return listing


for _path, _aggregate in ROUTES:
    router.add_api_route(
        _path,
        _listing(_aggregate),
        methods=["GET"],
        response_model=NotificationList,
        name=f"{_aggregate}_notifications",
        summary=f"The notifications this {_aggregate} made and what became of each delivery",
    )
