"""The client's models name only fields the gateway's response models have: a renamed or
removed field of the API fails here, not in a user's script."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from longhaul.client import _calls, models
from longhaul.domain.settings import SETTINGS, TraceSettings
from longhaul.gateway.routers import bundles, evals, experiences, files
from longhaul.gateway.routers.info import Info
from longhaul.gateway.schemas import runs, schedules, tasks, traces, usage, waiting
from pydantic import BaseModel, ValidationError

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
    (models.CheckVerdict, evals.CheckVerdictBody),
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


EVERY_SETTING: dict[str, Any] = {
    "model": "scripted:auto",
    "model_fallback": ["scripted:demo"],
    "preset": "browser",
    "tools": ["read"],
    "skills": ["a-skill"],
    "max_iterations": 7,
    "max_tokens": 1000,
    "max_cost": 0.5,
    "on_limit": "ask",
    "temperature": 0.3,
    "system_prompt": "be brief",
    "model_params": {"top_p": 0.5, "tool_choice": {"name": "read"}},
    "auto_execute_tools": False,
    "approval": {"tools": "*"},
    "verification": {"json_schema": {"type": "object"}},
    "messaging": True,
    "experiences": False,
    "client_tools": [{"name": "lookup", "parameters": {"type": "object"}}],
    "output_schema": {"schema": {"type": "object"}, "strict": True},
}
"""A value other than the default for every trace setting."""


def test_the_client_settings_are_the_domain_settings_field_for_field() -> None:
    """The standalone client's ``TraceSettings`` has the domain's fields, in its order, with
    its defaults: a setting added to the domain and not the client fails here."""
    domain = msgspec.structs.fields(TraceSettings)
    assert list(models.TraceSettings.model_fields) == [field.name for field in domain]
    for field in domain:
        assert models.TraceSettings.model_fields[field.name].default == field.default, field.name
    assert set(EVERY_SETTING) == SETTINGS  # this test names them all


def test_what_the_client_sends_the_gateway_takes_as_the_same_settings() -> None:
    stated = models.TraceSettings(**EVERY_SETTING)
    call = _calls.create_trace("hi", settings=stated, max_iterations=9)
    assert call.body["max_iterations"] == 9  # a named setting goes over the settings'
    body = traces.CreateTraceRequest.model_validate(call.body)
    expected = msgspec.convert({**EVERY_SETTING, "max_iterations": 9}, TraceSettings)
    assert body.settings() == expected
    assert all(getattr(expected, name) != field.default for name, field in _defaults().items())


def test_the_client_refuses_a_setting_it_does_not_know() -> None:
    with pytest.raises(ValidationError):
        models.TraceSettings.model_validate({"max_iteration": 3})


def _defaults() -> dict[str, msgspec.structs.FieldInfo]:
    return {field.name: field for field in msgspec.structs.fields(TraceSettings)}
