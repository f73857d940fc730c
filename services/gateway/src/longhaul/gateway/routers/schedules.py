"""``/api/schedules``: runs that start themselves on a cron, an interval or once at a time.

A schedule lives in ``lh_schedules`` under its key's owner (another key's id is 404, as an
unknown one); every gateway's ticker (``schedules/ticker.py``) starts its runs, each with
the schedule's id on its first event and an id derived from the tick.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Header
from longhaul.domain.ids import new_id
from longhaul.gateway import access
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.records import ScheduledRun, ScheduleRecord
from longhaul.gateway.schedules.store import SCHEDULE_PREFIX, StaleRecord
from longhaul.gateway.schedules.ticker import now_ms
from longhaul.gateway.schedules.timing import Timing
from longhaul.gateway.schedules.views import run_view, schedule_view, started_view
from longhaul.gateway.schemas.schedules import (
    CreateScheduleRequest,
    RunStarted,
    ScheduleList,
    ScheduleRuns,
    ScheduleView,
    UpdateScheduleRequest,
)
from longhaul.gateway.usecases import scheduled_runs

router = APIRouter(prefix="/api/schedules", tags=["schedules"], responses=ERROR_RESPONSES)

CAS_ATTEMPTS = 8
MAX_PER_KEY = 1000
"""Every gateway's ticker reads every schedule each pass: one key cannot make that unbounded."""
TIMING_FIELDS = frozenset({"cron", "timezone", "every_s", "at"})


def _timing(fields: dict[str, Any], anchor_ms: int) -> Timing:
    try:
        return Timing(
            cron=fields.get("cron"),
            timezone=fields.get("timezone") or "UTC",
            every_s=fields.get("every_s"),
            at=fields.get("at"),
            anchor_ms=anchor_ms,
        )
    except ValueError as exc:
        raise ApiError(422, "invalid_schedule", str(exc)) from None


def _first_tick(timing: Timing, now: int) -> int:
    first = timing.first_after(now)
    if first is None:
        raise ApiError(422, "invalid_schedule", "the schedule has no tick in the future")
    return first


@router.post("", status_code=201, response_model=ScheduleView, summary="Create a schedule")
async def create_schedule(
    body: CreateScheduleRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> ScheduleView:
    template = await scheduled_runs.checked(runtime, principal, body.template)
    now = now_ms()
    timing = _timing(body.model_dump(), now)
    record = ScheduleRecord(
        schedule_id=new_id(SCHEDULE_PREFIX),
        owner=principal.owner,
        name=body.name,
        template=template,
        created_at=now / 1000,
        updated_at=now / 1000,
        anchor_ms=now,
        cron=body.cron,
        timezone=body.timezone or "UTC",
        every_s=body.every_s,
        at=body.at,
        overlap=body.overlap,
        catch_up=body.catch_up,
        paused=body.paused,
        next_tick_ms=_first_tick(timing, now),
    )
    async with runtime.nats_call():
        store = runtime.schedule_store
        if len(await store.owned(principal.owner)) >= MAX_PER_KEY:
            raise ApiError(409, "conflict", f"a key has at most {MAX_PER_KEY} schedules")
        await store.create(record)
    return schedule_view(record)


@router.get("", response_model=ScheduleList, summary="Your schedules, newest first")
async def list_schedules(runtime: CurrentRuntime, principal: CurrentPrincipal) -> ScheduleList:
    async with runtime.nats_call():
        records = await runtime.schedule_store.owned(principal.owner)
    return ScheduleList(schedules=[schedule_view(record) for record in records])


@router.get("/{schedule_id}", response_model=ScheduleView, summary="One schedule")
async def get_schedule(
    schedule_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> ScheduleView:
    record, _ = await access.owned_schedule(runtime, principal, schedule_id)
    return schedule_view(record)


@router.patch("/{schedule_id}", response_model=ScheduleView, summary="Change, pause or resume")
async def update_schedule(
    schedule_id: str,
    body: UpdateScheduleRequest,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
) -> ScheduleView:
    given = body.model_dump(exclude_unset=True)
    if body.template is not None:
        given["template"] = await scheduled_runs.checked(runtime, principal, body.template)
    for _ in range(CAS_ATTEMPTS):
        record, revision = await access.owned_schedule(runtime, principal, schedule_id)
        changed = _changed(record, given)
        try:
            async with runtime.nats_call():
                await runtime.schedule_store.update(changed, revision)
        except StaleRecord:
            continue  # the ticker moved it meanwhile: apply the change to the new one
        return schedule_view(changed)
    raise ApiError(409, "concurrent_update", f"schedule {schedule_id} kept changing; retry")


def _changed(record: ScheduleRecord, given: dict[str, Any]) -> ScheduleRecord:
    """``record`` with the given fields; a new timing or a resume counts from now."""
    now = now_ms()
    # a null name, policy or pause changes nothing (only a timing field may be nulled)
    fields = {k: v for k, v in given.items() if k not in TIMING_FIELDS and v is not None}
    if "timezone" in given:
        given = {**given, "timezone": given["timezone"] or "UTC"}
    changed = msgspec.structs.replace(record, **fields, updated_at=now / 1000)
    retimed = TIMING_FIELDS & given.keys()
    if retimed:
        timing = {key: getattr(record, key) for key in TIMING_FIELDS} | {
            key: given[key] for key in retimed
        }
        changed = msgspec.structs.replace(changed, **timing, anchor_ms=now)
    if retimed or (record.paused and not changed.paused):
        timing_now = _timing(msgspec.structs.asdict(changed), changed.anchor_ms)
        changed = msgspec.structs.replace(changed, next_tick_ms=_first_tick(timing_now, now))
    if record.paused and not changed.paused:  # a resume starts the count of failures afresh
        changed = msgspec.structs.replace(changed, failures=0, failure_code="", paused_reason="")
    return changed


@router.delete("/{schedule_id}", summary="Delete a schedule with its notifications (its runs stay)")
async def delete_schedule(
    schedule_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> dict[str, Any]:
    await access.owned_schedule(runtime, principal, schedule_id)
    async with runtime.nats_call():
        await runtime.schedule_store.delete(principal.owner, schedule_id)
        await runtime.service.eraser.erase_schedule(schedule_id)  # its failed ticks' log
    return {"schedule_id": schedule_id, "deleted": True}


IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", pattern=r"^[!-~]{1,255}$")]


@router.post("/{schedule_id}/run", status_code=202, response_model=RunStarted, summary="Run it now")
async def run_now(
    schedule_id: str,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
    idempotency_key: IdempotencyKey = None,
) -> RunStarted:
    """A run outside the timing (a paused schedule too); with ``Idempotency-Key`` a repeat
    starts nothing and answers the same run."""
    record, _ = await access.owned_schedule(runtime, principal, schedule_id)
    cause = idempotency_key or new_id("now")
    run_id = scheduled_runs.derived_run_id(record.template.kind, schedule_id, "manual", cause)
    started = await scheduled_runs.start(
        runtime, principal.owner, record.template, run_id, schedule_id=schedule_id
    )
    run = ScheduledRun(
        run_id=run_id,
        kind=record.template.kind,
        tick_ms=now_ms(),
        started_at=time.time(),
        manual=True,
    )
    for _ in range(CAS_ATTEMPTS):
        record, revision = await access.owned_schedule(runtime, principal, schedule_id)
        try:
            async with runtime.nats_call():
                await runtime.schedule_store.update(
                    msgspec.structs.replace(record, runs=record.with_run(run)), revision
                )
            break
        except StaleRecord:
            continue
    return started_view(run_id, record.template.kind, started.new)


@router.get("/{schedule_id}/runs", response_model=ScheduleRuns, summary="The runs it started")
async def schedule_runs(
    schedule_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> ScheduleRuns:
    record, _ = await access.owned_schedule(runtime, principal, schedule_id)
    views = []
    for run in reversed(record.runs):
        views.append(run_view(run, await _status(runtime, run)))
    return ScheduleRuns(schedule_id=schedule_id, runs=views)


async def _status(runtime: Runtime, run: ScheduledRun) -> str | None:
    if run.kind == "trace":
        entry = runtime.mirror.entries.get(run.run_id)
        if entry is not None:
            return entry.status
    repository = runtime.traces if run.kind == "trace" else runtime.tasks
    async with runtime.nats_call():
        state = await repository.load(run.run_id)
    return state.status if state.exists else None
