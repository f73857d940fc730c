"""``POST /api/runs``: a goal, routed to one agent (a trace) or a planned team (a task)."""

from __future__ import annotations

from typing import Literal, Self

import msgspec
from longhaul.domain.events import RouteDecision
from longhaul.gateway.schemas.common import (
    Body,
    Iterations,
    ModelName,
    Name,
    ShortText,
    Text,
    TokenCount,
)
from pydantic import BaseModel, Field

MAX_RUN_FILES = 20


class RunFile(Body):
    name: str = Field(
        max_length=128, description="a plain file name: letters, digits, . _ - (no path)"
    )
    content: str = Field(description="the file's bytes, base64")
    media_type: ShortText | None = None


class CreateRunRequest(Body):
    goal: Text = Field(min_length=1)
    mode: Literal["auto", "trace", "task"] = Field(
        default="auto",
        description="auto: estimate the goal's complexity and route it (above "
        "pipeline.routing.team_above a task, else a trace); trace / task: that kind",
    )
    model: ModelName | None = Field(default=None, description="the run's (or phases') model")
    preset: Name | None = Field(default=None, description="a trace's preset")
    tools: list[Name] | None = Field(default=None, max_length=256, description="a trace's tools")
    max_iterations: Iterations | None = Field(default=None, description="a trace's limit")
    max_tokens: TokenCount | None = Field(
        default=None, description="the trace's, or the task's over all its step traces"
    )
    max_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
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
