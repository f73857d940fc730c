"""Task requests and views (DESIGN.md §7 shapes)."""

from __future__ import annotations

from typing import Annotated, Any

from longhaul.gateway.schemas.common import Body, Text
from pydantic import BaseModel, Field, StringConstraints


class CreateTaskRequest(Body):
    goal: Text = Field(min_length=1)
    mode: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z_]{0,31}$")] = "plan"
    options: dict[str, Any] = Field(default_factory=dict)


class TaskAccepted(BaseModel):
    task_id: str
    status: str
    event_id: int


class PhaseView(BaseModel):
    id: str
    name: str
    description: str = ""
    depends_on: list[str] = Field(default_factory=list)
    status: str
    trace_ids: list[str] = Field(default_factory=list)
    attempts: int = 0
    summary: str = ""
    output_ref: str = ""
    error: str = ""


class TaskView(BaseModel):
    task_id: str
    status: str
    goal: str
    mode: str
    phases: list[PhaseView] = Field(default_factory=list)
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
