"""``POST /api/runs``: a goal, routed to one agent (a trace) or a planned team (a task)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Self

import msgspec
from longhaul.domain.events import RouteDecision
from longhaul.gateway.schemas.common import Body, ShortText, Text
from longhaul.gateway.schemas.settings import SettingsBody, with_settings
from pydantic import BaseModel, Field

MAX_RUN_FILES = 20


class RunFile(Body):
    name: str = Field(
        max_length=128, description="a plain file name: letters, digits, . _ - (no path)"
    )
    content: str = Field(description="the file's bytes, base64")
    media_type: ShortText | None = None


class _CreateRunRequest(SettingsBody):
    goal: Text = Field(min_length=1)
    mode: Literal["auto", "trace", "task"] = Field(
        default="auto",
        description="auto: estimate the goal's complexity and route it (above "
        "pipeline.routing.team_above a task, else a trace); trace / task: that kind",
    )
    name: ShortText | None = None
    review: bool | None = Field(
        default=None, description="a task waits in awaiting_review for POST /api/tasks/{id}/plan"
    )
    files: list[RunFile] = Field(
        default_factory=list,
        max_length=MAX_RUN_FILES,
        description="written into the new trace's working directory before its first model "
        "call (a run with files is one agent: mode auto becomes trace, task is refused); in "
        "all at most gateway.max_body_bytes, larger ones go to POST /api/traces/{id}/files",
    )


RUN_SETTINGS = {
    "model": "the run's (or phases') model",
    "preset": "a trace's preset",
    "tools": "a trace's tools",
    "max_iterations": "a trace's limit",
    "max_tokens": "the trace's, or the task's over all its step traces",
    "max_cost": "",
}
"""The settings a routed run takes, with what each means for a run (a task uses the model and
the two caps)."""

if TYPE_CHECKING:  # the settings fields are added at runtime; code reads them via settings()
    CreateRunRequest = _CreateRunRequest
else:
    CreateRunRequest = with_settings(
        "CreateRunRequest",
        _CreateRunRequest,
        RUN_SETTINGS,
        {name: text for name, text in RUN_SETTINGS.items() if text},
    )


class RouteView(BaseModel):
    complexity: float = Field(ge=0, le=1)
    tier: Literal["react", "skill", "team"]
    reason: str
    source: Literal["model", "rules"] = Field(description="who estimated the complexity")
    mode: Literal["auto", "trace", "task"] = "auto"

    @classmethod
    def of(cls, decision: RouteDecision) -> Self:
        return cls.model_validate(msgspec.to_builtins(decision))


class RunAccepted(BaseModel):
    kind: Literal["trace", "task"]
    trace_id: str | None = None
    task_id: str | None = None
    status: str
    complexity: float
    reason: str
    route: RouteView
    event_id: int
