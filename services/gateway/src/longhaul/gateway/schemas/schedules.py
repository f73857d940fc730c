"""Bodies and answers of ``/api/schedules`` and ``/api/triggers``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from longhaul.gateway.schemas.common import Body, Input, ShortText
from pydantic import BaseModel, Field, StringConstraints

Overlap = Literal["skip", "queue", "allow"]
CatchUp = Literal["none", "latest", "all"]
Kind = Literal["trace", "task"]
TriggerName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]


class TemplateBody(Input):
    kind: Kind
    body: dict[str, Any] = Field(
        description="a POST /api/traces (kind trace) or POST /api/tasks (kind task) body, "
        "checked as that route checks it"
    )


class ScheduleTiming(Body):
    cron: ShortText | None = Field(default=None, description="5 fields, in timezone")
    timezone: ShortText = Field(default="UTC", description="an IANA zone, for cron")
    every_s: float | None = Field(
        default=None, ge=1, le=366 * 86400, allow_inf_nan=False, description="a fixed interval"
    )
    at: ShortText | None = Field(default=None, description="one run at an RFC 3339 time")


class CreateScheduleRequest(ScheduleTiming):
    name: ShortText = Field(min_length=1)
    template: TemplateBody
    overlap: Overlap = Field(default="skip", description="while the previous run is going")
    catch_up: CatchUp = Field(default="none", description="for ticks missed during downtime")
    paused: bool = False


class UpdateScheduleRequest(Body):
    """Only the fields given change; to switch timing, give the new one and null the old."""

    name: ShortText | None = Field(default=None, min_length=1)
    cron: ShortText | None = None
    timezone: ShortText | None = None
    every_s: float | None = Field(default=None, ge=1, le=366 * 86400, allow_inf_nan=False)
    at: ShortText | None = None
    template: TemplateBody | None = None
    overlap: Overlap | None = None
    catch_up: CatchUp | None = None
    paused: bool | None = None


class ScheduleView(BaseModel):
    schedule_id: str
    name: str
    cron: str | None = None
    timezone: str = "UTC"
    every_s: float | None = None
    at: str | None = None
    template: TemplateBody
    overlap: Overlap
    catch_up: CatchUp
    paused: bool
    next_run_at: str | None = Field(default=None, description="the next tick, RFC 3339 (UTC)")
    runs_started: int = Field(default=0, description="runs it lists (the latest 100)")
    skipped: int = Field(default=0, description="ticks passed by (overlap skip, catch-up)")
    last_error: str = Field(default="", description="why the last tick could not start a run")
    failures: int = Field(
        default=0, description="ticks in a row that started nothing (0 once one starts a run)"
    )
    paused_reason: str = Field(
        default="",
        description="why longhaul paused it (gateway.schedule_pause_after_failures failed "
        "ticks in a row); cleared on resume",
    )
    created_at: float
    updated_at: float


class ScheduleList(BaseModel):
    schedules: list[ScheduleView]


class ScheduleRunView(BaseModel):
    run_id: str
    kind: Kind
    tick: str = Field(description="the tick it was started for, RFC 3339 (UTC)")
    manual: bool = False
    started_at: float
    status: str | None = Field(default=None, description="the run's status now")


class ScheduleRuns(BaseModel):
    schedule_id: str
    runs: list[ScheduleRunView]


class RunStarted(BaseModel):
    run_id: str
    kind: Kind
    trace_id: str | None = None
    task_id: str | None = None
    new: bool = Field(description="false: a repeat of a start already made; nothing started")


class CreateTriggerRequest(Body):
    name: TriggerName = Field(description="unique among your triggers")
    template: TemplateBody


class TriggerView(BaseModel):
    trigger_id: str
    name: str
    template: TemplateBody
    url: str = Field(description="where to POST the signed webhook")
    created_at: float


class TriggerCreated(TriggerView):
    secret: str = Field(description="the HMAC key, shown only now")


class TriggerList(BaseModel):
    triggers: list[TriggerView]
