"""Reading aggregates on behalf of a caller: id checks, folds, and ownership.

A trace belongs to the key that created it; a sub-trace or a task's step trace that records
no owner inherits its parent's (or its task's). Anything the caller does not own is reported
exactly like something that does not exist (404), so ids cannot be probed across keys.
The checks that read the store are each bounded by the request's NATS deadline
(:meth:`Runtime.nats_call`: 503 when the server does not answer).
"""

from __future__ import annotations

from typing import Literal

from longhaul.core.repository import Recorded, Repository
from longhaul.domain import events as ev
from longhaul.domain.events import Unreadable
from longhaul.domain.ids import is_valid_id
from longhaul.domain.state import TaskState, TraceState
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import not_found
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.records import ScheduleRecord

MAX_OWNER_HOPS = 16


def checked_id(kind: str, identifier: str) -> str:
    """Ids go into NATS subjects: anything outside ``[A-Za-z0-9_-]`` (dots, wildcards,
    slashes) is refused before it gets near one."""
    if not is_valid_id(identifier):
        raise not_found(kind, identifier[:64])
    return identifier


async def first_stored(
    runtime: Runtime, aggregate: Literal["trace", "task"], aggregate_id: str
) -> Recorded | Unreadable | None:
    """The aggregate's first stored event (one direct read), or None
    (:meth:`~longhaul.core.repository.Repository.first`)."""
    repository: Repository[TraceState] | Repository[TaskState] = (
        runtime.traces if aggregate == "trace" else runtime.tasks
    )
    return await repository.first(aggregate_id)


async def task_ids(runtime: Runtime) -> list[str]:
    """Every task id in the stream, newest first (ids are time-ordered): the ids with a
    ``task_created`` event, as the stream counts them (one request, no payloads)."""
    async with runtime.nats_call():
        created = await runtime.tasks.counts("task_created")
    return sorted(created, reverse=True)


async def first_event(
    runtime: Runtime, aggregate: Literal["trace", "task"], aggregate_id: str
) -> ev.Event | None:
    """The aggregate's creation event (one direct read), or None if it has no events (or
    an unreadable first one: no creation to check against)."""
    stored = await first_stored(runtime, aggregate, aggregate_id)
    return stored.event if isinstance(stored, Recorded) else None


async def resolve_owner(
    runtime: Runtime, owner: str | None, parent_trace_id: str | None, task_id: str | None
) -> str | None:
    """Follow parent traces (then the task) until one records an owner."""
    for _ in range(MAX_OWNER_HOPS):
        if owner:
            return owner
        if parent_trace_id:
            created = await first_event(runtime, "trace", parent_trace_id)
            if not isinstance(created, ev.TraceCreated):
                return None
            owner, parent_trace_id = created.owner, created.parent_trace_id
            task_id = created.task_id or task_id
            continue
        if task_id:
            task = await first_event(runtime, "task", task_id)
            return task.owner if isinstance(task, ev.TaskCreated) else None
        return None
    return None


async def owned_creation(runtime: Runtime, principal: Principal, trace_id: str) -> Recorded:
    """The trace's stored creation, if the trace exists and belongs to the caller, else 404
    (cheap: reads its first event, and its parents' while they record no owner)."""
    checked_id("trace", trace_id)
    async with runtime.nats_call():
        stored = await first_stored(runtime, "trace", trace_id)
        if not isinstance(stored, Recorded) or not isinstance(stored.event, ev.TraceCreated):
            raise not_found("trace", trace_id)
        created = stored.event
        owner = await resolve_owner(
            runtime, created.owner, created.parent_trace_id, created.task_id
        )
    if owner != principal.owner:
        raise not_found("trace", trace_id)
    return stored


async def require_trace_owner(runtime: Runtime, principal: Principal, trace_id: str) -> None:
    """404 unless the trace exists and belongs to the caller (cheap: reads one event)."""
    await owned_creation(runtime, principal, trace_id)


async def owned_trace(runtime: Runtime, principal: Principal, trace_id: str) -> TraceState:
    checked_id("trace", trace_id)
    async with runtime.nats_call():
        state = await runtime.traces.load(trace_id)
        if not state.exists:
            raise not_found("trace", trace_id)
        owner = await resolve_owner(runtime, state.owner, state.parent_trace_id, state.task_id)
    if owner != principal.owner:
        raise not_found("trace", trace_id)
    return state


async def viewed_trace(runtime: Runtime, principal: Principal, trace_id: str) -> TraceState:
    """The caller's trace from the folds kept between reads (:attr:`Runtime.viewed_traces`),
    caught up with the log: to read, never to change. Ownership is checked on every request
    from the stored creation, before any cached fold is touched, so an erased trace or
    another key's is 404 however recently it was read."""
    created = await owned_creation(runtime, principal, trace_id)
    async with runtime.nats_call():
        state = await runtime.viewed_traces.load(trace_id, origin=created.seq)
    if not state.exists:
        raise not_found("trace", trace_id)
    return state


async def require_task_owner(runtime: Runtime, principal: Principal, task_id: str) -> None:
    checked_id("task", task_id)
    async with runtime.nats_call():
        created = await first_event(runtime, "task", task_id)
    if not isinstance(created, ev.TaskCreated) or created.owner != principal.owner:
        raise not_found("task", task_id)


async def owned_task(runtime: Runtime, principal: Principal, task_id: str) -> TaskState:
    checked_id("task", task_id)
    async with runtime.nats_call():
        state = await runtime.tasks.load(task_id)
    if not state.exists or state.owner != principal.owner:
        raise not_found("task", task_id)
    return state


async def owned_schedule(
    runtime: Runtime, principal: Principal, schedule_id: str
) -> tuple[ScheduleRecord, int]:
    """The caller's schedule and its revision, or 404 (another key's as an unknown one)."""
    async with runtime.nats_call():
        found = await runtime.schedule_store.get(principal.owner, schedule_id)
    if found is None:
        raise not_found("schedule", schedule_id[:64])
    return found


async def require_schedule_owner(runtime: Runtime, principal: Principal, schedule_id: str) -> None:
    """404 unless the schedule exists and is the caller's (its notifications' listing)."""
    await owned_schedule(runtime, principal, schedule_id)
