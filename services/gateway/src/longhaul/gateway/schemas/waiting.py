"""``GET /api/inbox``: what waits for a person across a key's runs, oldest first."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

InboxKind = Literal["question", "approval", "plan_review", "budget"]


class PlanPhaseView(BaseModel):
    id: str
    name: str
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)


class InboxItem(BaseModel):
    kind: InboxKind
    trace_id: str | None = Field(description="the waiting trace (None for a task's plan)")
    task_id: str | None = None
    since: float = Field(description="when the wait began (Unix seconds)")
    name: str | None = Field(default=None, description="the trace's name, or the task's goal")
    deadline: float | None = Field(
        default=None, description="when the wait's default action is taken (Unix seconds)"
    )
    on_deadline: Literal["deny", "stop"] | None = None
    question: str | None = Field(
        default=None,
        description="question: what the agent asks; budget: the limit reached and what was "
        "spent (answer with POST /api/traces/{id}/budget)",
    )
    tool_call_id: str | None = Field(default=None, description="approval: the call to decide")
    tool: str | None = None
    arguments: Any = Field(
        default=None, description="approval: the call's arguments (an object; text if not JSON)"
    )
    truncated: bool = Field(
        default=False, description="the question or arguments are cut: GET the trace for all"
    )
    outcome_unknown: bool = Field(
        default=False, description="approval of a call cut off by a crash (run again or not)"
    )
    goal: str | None = Field(default=None, description="plan_review: the task's goal")
    phases: list[PlanPhaseView] | None = Field(
        default=None, description="plan_review: the proposed plan"
    )


class InboxView(BaseModel):
    items: list[InboxItem]
    count: int
