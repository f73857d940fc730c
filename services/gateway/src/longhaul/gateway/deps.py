"""What handlers ask FastAPI for: the runtime, and the aggregates the caller owns.

``OwnedTrace`` / ``OwnedTask`` fold the aggregate named by the path's ``trace_id`` /
``task_id`` (``ViewedTrace``: from the folds kept between reads) and answer 404 for one the
caller does not own, exactly as for one that does not exist (:mod:`longhaul.gateway.access`);
``OwnedTraceId`` / ``OwnedTaskId`` check the same without folding.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from longhaul.domain.state import TaskState, TraceState
from longhaul.gateway import access
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.runtime import Runtime, runtime_of


def _runtime(request: Request) -> Runtime:
    return runtime_of(request.app)


CurrentRuntime = Annotated[Runtime, Depends(_runtime)]


async def _owned_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> TraceState:
    return await access.owned_trace(runtime, principal, trace_id)


async def _viewed_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> TraceState:
    return await access.viewed_trace(runtime, principal, trace_id)


async def _owned_task(
    task_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> TaskState:
    return await access.owned_task(runtime, principal, task_id)


async def _owned_trace_id(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> str:
    await access.require_trace_owner(runtime, principal, trace_id)
    return trace_id


async def _owned_task_id(task_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal) -> str:
    await access.require_task_owner(runtime, principal, task_id)
    return task_id


OwnedTrace = Annotated[TraceState, Depends(_owned_trace)]
ViewedTrace = Annotated[TraceState, Depends(_viewed_trace)]
"""The caller's trace for a route that only reads it: a fold kept between requests and
caught up with the log (shared with other readers: never changed)."""
OwnedTask = Annotated[TaskState, Depends(_owned_task)]
OwnedTraceId = Annotated[str, Depends(_owned_trace_id)]
"""The path's ``trace_id``, once checked to be the caller's (reads one event, folds none)."""
OwnedTaskId = Annotated[str, Depends(_owned_task_id)]
