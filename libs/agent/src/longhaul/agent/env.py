"""``AgentEnv``: the long-lived surroundings of every turn (set up once per executor)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from longhaul.agent.context_hooks import ContextHooks
from longhaul.agent.contract import Messenger, ProviderBreaker
from longhaul.agent.experiences import ExperienceBook
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.skills import SkillIndex
from longhaul.agent.tools.settings import ToolSettings
from longhaul.agent.workspace import Workspace
from longhaul.domain.config import MemoryConfig, ModelsConfig
from longhaul.domain.state import TraceState

AncestorBudget = Callable[[TraceState], Awaitable[str | None]]
"""For a sub-trace: ``max_tokens`` / ``max_cost`` if an ancestor's run budget is used up,
counting the usage of every descendant still running (the executor reads it from the log)."""


class SpendLimits(Protocol):
    """The key's spend per UTC day and month, counted from the log (the executor keeps it in
    KV, ``longhaul.core.spend``)."""

    async def reached(self, state: TraceState) -> str | None:
        """Count ``state``'s usage; what its key is told at a limit, or ``None``."""
        ...

    async def count(self, state: TraceState) -> None:
        """Count ``state``'s usage (a turn's last model call)."""
        ...


StorageCheck = Callable[[], Awaitable[str | None]]
"""Why the stores have no room for more of a run (None: there is room); the executor reads
the event stream's and object store's fill (``longhaul.core.storage``)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class AgentEnv:
    """What the engine needs besides the trace, the sink and the model.

    ``working_root``: traces work in it, or in their ``config.working_dir`` resolved inside
    it (an absolute ``working_dir`` outside the root is refused: set the root to ``/`` to
    allow anything). ``models`` supplies price and context-limit overrides. ``clock`` (for
    durations and delta throttling) and ``now`` (for the prompt's date) are injectable so
    tests never sleep.
    """

    presets: PresetCatalog = field(default_factory=PresetCatalog)
    skills: SkillIndex = field(default_factory=lambda: SkillIndex(()))
    workspace: Workspace | None = None
    working_root: Path = field(default_factory=Path.cwd)
    tool_settings: ToolSettings = field(default_factory=ToolSettings)
    models: ModelsConfig | None = None
    context_hooks: ContextHooks = field(default_factory=ContextHooks)
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = _utcnow
    ancestor_budget: AncestorBudget | None = None
    spend: SpendLimits | None = None
    """The key's spend limits, asked before each model call (``None``: none kept)."""
    storage_full: StorageCheck | None = None
    """Asked before each model call: a reason stops the run with ``storage_full``."""
    messenger: Messenger | None = None
    """Delivers ``send_message`` into another trace's inbox (the executor's)."""
    experiences: ExperienceBook | None = None
    """The owners' experiences (``None``: no recall, no ``get_experience``)."""
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    breaker: ProviderBreaker | None = None
    """The deployment's circuit breaker per provider (``None``: every call is made)."""
