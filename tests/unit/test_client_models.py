"""The client's models name only fields the gateway's response models have: a renamed or
removed field of the API fails here, not in a user's script."""

from __future__ import annotations

import pytest
from longhaul.client import models
from longhaul.gateway.routers import bundles, evals, experiences, files
from longhaul.gateway.routers.info import Info
from longhaul.gateway.schemas import runs, schedules, tasks, traces, usage, waiting
from pydantic import BaseModel

PAIRS: list[tuple[type[BaseModel], type[BaseModel]]] = [
    (models.Info, Info),
    (models.Accepted, traces.Accepted),
    (models.MessageAccepted, traces.MessageAccepted),
    (models.Erased, traces.Erased),
    (models.Deleted, traces.Deleted),
    (models.KeyErased, traces.KeyErased),
    (models.KeyHoldings, traces.KeyHoldings),
    (models.KeyHoldingsList, traces.KeyHoldingsList),
    (models.TraceImported, bundles.Imported),
    (models.TaskAccepted, tasks.TaskAccepted),
    (models.RunAccepted, runs.RunAccepted),
    (models.Route, runs.RouteView),
    (models.Totals, traces.TotalsView),
    (models.WaitingBelow, traces.WaitingBelowView),
    (models.TraceSummary, traces.TraceSummary),
    (models.PendingCall, traces.PendingCallView),
    (models.CutOffEffect, traces.CutOffEffectView),
    (models.Goal, traces.GoalView),
    (models.GoalTree, traces.GoalTreeView),
    (models.SubTrace, traces.SubTraceView),
    (models.RunUsage, traces.RunUsageView),
    (models.Budget, traces.BudgetView),
    (models.Trace, traces.TraceView),
    (models.TraceList, traces.TraceList),
    (models.Message, traces.MessageView),
    (models.Messages, traces.MessagesResponse),
    (models.Phase, tasks.PhaseView),
    (models.Task, tasks.TaskView),
    (models.TaskSummary, tasks.TaskSummary),
    (models.TaskList, tasks.TaskList),
    (models.Checkpoint, tasks.CheckpointView),
    (models.CheckpointList, tasks.CheckpointList),
    (models.CheckpointsCleared, tasks.CheckpointsCleared),
    (models.TaskDeleted, tasks.TaskDeleted),
    (models.Experience, experiences.ExperienceView),
    (models.ExperienceList, experiences.ExperienceList),
    (models.Imported, experiences.Imported),
    (models.UploadedFile, files.UploadedFile),
    (models.FilesAccepted, files.FilesAccepted),
    (models.EvalTag, traces.EvalTagView),
    (models.EvalRun, evals.RunView),
    (models.EvalSummary, evals.EvalSummary),
    (models.Eval, evals.EvalView),
    (models.EvalList, evals.EvalList),
    (models.EvalCheck, evals.CheckView),
    (models.TaskFromTrace, evals.TaskFromTrace),
    (models.Template, schedules.TemplateBody),
    (models.Schedule, schedules.ScheduleView),
    (models.ScheduleList, schedules.ScheduleList),
    (models.ScheduleRun, schedules.ScheduleRunView),
    (models.ScheduleRuns, schedules.ScheduleRuns),
    (models.RunStarted, schedules.RunStarted),
    (models.Trigger, schedules.TriggerView),
    (models.TriggerCreated, schedules.TriggerCreated),
    (models.TriggerList, schedules.TriggerList),
    (models.InboxPhase, waiting.PlanPhaseView),
    (models.InboxItem, waiting.InboxItem),
    (models.Inbox, waiting.InboxView),
    (models.UsageRow, usage.UsageRowView),
    (models.Usage, usage.UsageView),
    (models.BudgetAnswered, usage.BudgetAnswered),
    (models.BudgetWait, usage.BudgetWaitView),
    (models.BudgetWaits, usage.BudgetWaits),
]


@pytest.mark.parametrize(("client", "gateway"), PAIRS, ids=[c.__name__ for c, _ in PAIRS])
def test_client_fields_exist_in_the_gateway_model(
    client: type[BaseModel], gateway: type[BaseModel]
) -> None:
    missing = set(client.model_fields) - set(gateway.model_fields)
    assert not missing, f"{client.__name__} reads fields {gateway.__name__} does not have"
    for name, field in client.model_fields.items():
        if field.is_required():
            assert gateway.model_fields[name].is_required(), (
                f"{client.__name__}.{name} is required but the gateway may leave it out"
            )


def test_every_client_model_is_checked() -> None:
    declared = {
        value
        for value in vars(models).values()
        if isinstance(value, type) and issubclass(value, models.Model) and value is not models.Model
    }
    checked = {client for client, _ in PAIRS}
    # tool calls are checked through Message (the gateway derives them from the domain)
    assert declared - checked == {models.ToolCall, models.FunctionCall}
