"""Records as the API shows them."""

from __future__ import annotations

from longhaul.gateway.schedules.records import ScheduledRun, ScheduleRecord, Template, TriggerRecord
from longhaul.gateway.schedules.timing import rfc3339
from longhaul.gateway.schemas.schedules import (
    RunStarted,
    ScheduleRunView,
    ScheduleView,
    TemplateBody,
    TriggerView,
)


def template_view(template: Template) -> TemplateBody:
    return TemplateBody(kind=template.kind, body=template.body)


def schedule_view(record: ScheduleRecord) -> ScheduleView:
    return ScheduleView(
        schedule_id=record.schedule_id,
        name=record.name,
        cron=record.cron,
        timezone=record.timezone,
        every_s=record.every_s,
        at=record.at,
        template=template_view(record.template),
        overlap=record.overlap,
        catch_up=record.catch_up,
        paused=record.paused,
        next_run_at=None if record.next_tick_ms is None else rfc3339(record.next_tick_ms),
        runs_started=len(record.runs),
        skipped=record.skipped,
        last_error=record.last_error,
        failures=record.failures,
        paused_reason=record.paused_reason,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def run_view(run: ScheduledRun, status: str | None) -> ScheduleRunView:
    return ScheduleRunView(
        run_id=run.run_id,
        kind=run.kind,
        tick=rfc3339(run.tick_ms),
        manual=run.manual,
        started_at=run.started_at,
        status=status,
    )


def started_view(run_id: str, kind: str, new: bool) -> RunStarted:
    ids = {"trace_id": run_id} if kind == "trace" else {"task_id": run_id}
    return RunStarted(run_id=run_id, kind=kind, new=new, **ids)  # type: ignore[arg-type]


def trigger_view(record: TriggerRecord) -> TriggerView:
    return TriggerView(
        trigger_id=record.trigger_id,
        name=record.name,
        template=template_view(record.template),
        url=f"/api/triggers/{record.trigger_id}",
        created_at=record.created_at,
    )
