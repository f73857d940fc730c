"""Records as the API shows them."""

from __future__ import annotations

import msgspec
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
    """The record as the API shows it: the fields the view declares, the ticker's own
    (owner, cursor, anchor, run list) kept inside."""
    fields = msgspec.structs.asdict(record)
    shown = {name: fields[name] for name in ScheduleView.model_fields if name in fields}
    next_tick = record.next_tick_ms
    return ScheduleView(
        **shown
        | {
            "template": template_view(record.template),
            "next_run_at": None if next_tick is None else rfc3339(next_tick),
            "runs_started": len(record.runs),
        }
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
