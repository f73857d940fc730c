"""Task requests and views (docs/09-api.md shapes)."""

from __future__ import annotations

from typing import Any, Literal

from longhaul.gateway.schemas.common import Body, ShortText, Text, TokenCount
from longhaul.gateway.schemas.runs import RouteView
from longhaul.gateway.schemas.traces import Erased, FaultView
from pydantic import BaseModel, Field


class CreateTaskRequest(Body):
    goal: Text = Field(min_length=1)
    mode: Literal["plan", "compete"] = Field(
        default="plan",
        description="compete: the model planner gives phases where quality matters most "
        "several competitors and a merge strategy",
    )
    options: dict[str, Any] = Field(default_factory=dict)
    review: bool | None = Field(
        default=None,
        description="wait in awaiting_review for POST /plan before running the plan "
        "(default: the configured pipeline.plan_review)",
    )
    max_tokens: TokenCount | None = Field(
        default=None, description="cap on the tokens of all its step traces together"
    )
    max_cost: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="cap on their cost together"
    )


class ApprovePlan(Body):
    """Run the proposed plan, or the edited one given as ``phases``."""

    approved: Literal[True]
    phases: list[dict[str, Any]] | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="the edited plan (same shape and checks as options.phases and a model's "
        "plan; 422 invalid_plan lists the problems)",
    )
    reason: ShortText = ""


class RefusePlan(Body):
    """Refuse the plan: the task ends ``cancelled``."""

    approved: Literal[False]
    reason: ShortText = ""


ReviewPlanRequest = ApprovePlan | RefusePlan


class TaskAccepted(BaseModel):
    task_id: str
    status: str
    event_id: int


class MergeCandidateView(BaseModel):
    label: str
    trace_id: str
    status: str
    score: float | None = Field(default=None, description="vote total (vote only)")


class MergeView(BaseModel):
    """How a competitive phase's result was chosen."""

    strategy: str = Field(description="what the phase asked for: best, vote, fusion or first")
    method: str = Field(description="what decided: judge, vote, fusion or first (a fallback)")
    candidates: list[MergeCandidateView] = Field(default_factory=list)
    winner: str | None = Field(default=None, description="the chosen step trace; none for fusion")
    reason: str = ""


class PhaseView(BaseModel):
    id: str
    name: str
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)
    preset: str = "default"
    tools: list[str] | None = None
    criteria: list[str] = Field(default_factory=list)
    model: str | None = None
    status: str
    trace_ids: list[str] = Field(default_factory=list)
    attempts: int = 0
    summary: str = ""
    output_ref: str = ""
    error: str = ""
    merge: MergeView | None = None
    competitors: int = Field(
        default=0, description="competing step traces the plan gives this phase (0: one step)"
    )
    merge_strategy: str | None = Field(
        default=None, description="how a competitive phase's result will be chosen"
    )


class TaskView(BaseModel):
    task_id: str
    status: str
    goal: str
    mode: str
    phases: list[PhaseView] = Field(default_factory=list)
    plan_source: str = Field(
        default="", description="who made the plan: model, rules, options or review (edited)"
    )
    review_reason: str = Field(default="", description="what the reviewer said")
    route: RouteView | None = Field(default=None, description="why POST /api/runs made a task")
    schedule_id: str | None = Field(default=None, description="the schedule that started it")
    trigger_id: str | None = Field(default=None, description="the trigger that started it")
    max_tokens: int | None = Field(default=None, description="cap over all its step traces")
    max_cost: float | None = Field(default=None, description="cap over all its step traces")
    replans: list[str] = Field(default_factory=list)
    resumes: int = Field(default=0, description="resume requests accepted")
    resumes_handled: int = Field(
        default=0, description="resumes the planner carried out (fewer: one is pending)"
    )
    resume_source: str = Field(
        default="",
        description="where the last resume learnt which phases were complete: "
        "checkpoint, event_log or mixed (empty until a resume was carried out)",
    )
    summary: str = ""
    error: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    event_id: int = 0
    fault_log: list[FaultView] = Field(
        default_factory=list, description="events of its log that were skipped (latest 50)"
    )


class CheckpointView(BaseModel):
    phase_id: str
    name: str
    summary: str = ""
    result_ref: str = Field(description="workspace key of the phase's whole result")
    trace_id: str | None = None
    saved_at: float


class CheckpointList(BaseModel):
    checkpoints: list[CheckpointView]


class TaskDeleted(Erased):
    task_id: str


class CheckpointsCleared(BaseModel):
    task_id: str
    cleared: int = Field(description="checkpoints removed; a resume now reads the event log")


class TaskSummary(BaseModel):
    task_id: str
    status: str
    goal: str
    mode: str
    phases: int = Field(default=0, description="phases in the current plan")
    phases_completed: int = 0
    error: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0


class TaskList(BaseModel):
    tasks: list[TaskSummary]
    next_cursor: str | None = Field(
        default=None, description="pass as ?cursor= for the next (older) page; null on the last"
    )
