"""``/api/experiences``: what your agents have learned — the reflections recorded on your
most recent traces (``POST …/reflect`` answers hang off the head with
``branch_type="reflection"``), newest first.

Reflections live in the traces' logs, so this folds the newest ``traces`` of the caller's
traces (bounded, a few at a time) rather than keeping a second copy that could drift.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request
from longhaul.domain.state import TraceState
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.render import content_text
from longhaul.gateway.routers.traces import query_owned
from longhaul.gateway.runtime import runtime_of
from pydantic import BaseModel, Field

router = APIRouter(prefix="/api", tags=["experiences"], responses=ERROR_RESPONSES)

PARALLEL_FOLDS = 8


class Experience(BaseModel):
    trace_id: str
    trace_name: str | None = None
    sequence: int
    content: str
    created_at: float


class Experiences(BaseModel):
    experiences: list[Experience] = Field(default_factory=list)
    traces_scanned: int


def reflections(state: TraceState) -> list[Experience]:
    return [
        Experience(
            trace_id=state.trace_id,
            trace_name=state.name,
            sequence=message.sequence,
            content=content_text(message.content),
            created_at=message.created_at,
        )
        for message in state.all_messages()
        if message.branch_type == "reflection" and message.content
    ]


@router.get(
    "/experiences",
    response_model=Experiences,
    summary="Reflections recorded on your most recent traces",
)
async def experiences(
    request: Request,
    principal: CurrentPrincipal,
    traces: Annotated[int, Query(ge=1, le=100, description="how many recent traces")] = 20,
) -> Experiences:
    runtime = runtime_of(request.app)
    entries, _ = await query_owned(runtime, principal, limit=traces)
    gate = asyncio.Semaphore(PARALLEL_FOLDS)

    async def fold(trace_id: str) -> TraceState:
        async with gate:
            return await runtime.store.load_trace(trace_id)

    async with runtime.nats_call():
        states = await asyncio.gather(*(fold(entry.trace_id) for entry in entries))
    found = [item for state in states for item in reflections(state)]
    found.sort(key=lambda item: item.created_at, reverse=True)
    return Experiences(experiences=found, traces_scanned=len(entries))
