"""``ToolContext``: what a tool may know about the call it serves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from longhaul.agent.contract import Messenger
from longhaul.agent.experiences import ExperienceBook
from longhaul.agent.resources import TurnResources
from longhaul.agent.skills import SkillIndex
from longhaul.agent.tools.settings import ToolSettings
from longhaul.agent.workspace import Workspace
from longhaul.domain.events import TraceEvent
from longhaul.domain.state import TraceState


@dataclass(slots=True)
class ToolContext:
    """Per-call context. ``state`` is the trace as folded so far: read it, never mutate it.

    Tools that change the trace (``goal``, ``agent``) do not emit themselves: they
    :meth:`record` events, which the engine appends in one batch with the tool's result, so a
    crash can never persist the effect without the answer the model will see (or vice versa).
    """

    trace_id: str
    tool_call_id: str
    working_dir: Path
    state: TraceState
    goal_id: str | None = None
    workspace: Workspace | None = None
    settings: ToolSettings = field(default_factory=ToolSettings)
    skills: SkillIndex = field(default_factory=lambda: SkillIndex(()))
    messenger: Messenger | None = None
    experiences: ExperienceBook | None = None
    resources: TurnResources = field(default_factory=TurnResources)
    """Closed when the turn ends (see :mod:`longhaul.agent.resources`)."""
    recorded: list[TraceEvent] = field(default_factory=list)
    secrets: Mapping[str, str] = field(default_factory=dict)
    """What the operator granted this tool (``tools.secrets``): never in the model's view."""

    @property
    def idempotency_key(self) -> str:
        """Stable across re-executions of the same call after a crash (at-least-once tools)."""
        return f"{self.trace_id}:{self.tool_call_id}"

    def record(self, event: TraceEvent) -> None:
        self.recorded.append(event)
