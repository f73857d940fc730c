"""Operator knobs of the built-in tools (not model-visible)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from longhaul.domain.config import OnUnknown, SandboxConfig


@dataclass(frozen=True, slots=True)
class ToolSettings:
    bash_timeout_s: float = 120.0
    bash_max_timeout_s: float = 600.0
    output_cap: int = 30_000
    """Characters of tool output the model sees; beyond it, head and tail plus a reference
    to the whole output in the workspace (see :mod:`longhaul.agent.tools.offload`)."""
    capture_max_bytes: int = 64 * 1024 * 1024
    """Bytes of one ``bash`` command's output kept (and stored); the rest is only counted."""
    read_max_lines: int = 2_000
    grep_max_results: int = 200
    webfetch_timeout_s: float = 20.0
    webfetch_max_bytes: int = 2_000_000
    webfetch_allow_private: bool = False
    """Allow loopback, private and link-local targets (a local dev server, a lab network)."""
    image_max_bytes: int = 5_000_000
    """Largest image ``view_image`` shows (providers refuse bigger ones; Anthropic: 5 MB)."""
    browser_executable: str | None = None
    """Chromium for the browser tools (``None``: ``chromium`` on PATH, else Playwright's)."""
    browser_timeout_s: float = 20.0
    """One browser action (a navigation, a click)."""
    max_explore_tasks: int = 8
    max_delegation_depth: int = 2
    """Levels of sub-traces below a root (``pipeline.delegation.max_depth``)."""
    max_descendants: int = 50
    """Sub-traces per root, every level (``pipeline.delegation.max_descendants``)."""
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Per tool name, the secrets the operator granted it (``tools.secrets``, resolved from
    the executor's environment): a tool reads only its own, as ``ctx.secrets``."""
    """How ``bash`` is confined (see :mod:`longhaul.agent.tools.sandbox`)."""
    on_unknown: Mapping[str, OnUnknown] = field(default_factory=dict)
    """Per tool name, the operator's choice for a call cut off by a crash (``tools.on_unknown``);
    it overrides the tool's own."""
    remote_agents: dict[str, str] = field(default_factory=dict)
    """Configured remote longhauls (name → URL) ``agent(agent_url=…)`` may delegate to."""
