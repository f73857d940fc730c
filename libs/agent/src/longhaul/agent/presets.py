"""Presets: named agent profiles (tools, iteration budget, temperature, skills, prompt).

Built-ins: ``default`` (every tool), ``explore`` (read-only tools, used for explore
sub-agents), ``analyst`` (reads and reasons, never writes or runs commands). User presets come
from ``LonghaulConfig.presets`` (``presets: {name: {...}}`` in longhaul.yaml) and may
``extends`` another preset; a user preset with a built-in's name replaces it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

import msgspec
from longhaul.agent.tools.messaging import MESSAGING_TOOLS
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.domain.events import ModelParams, TraceConfig
from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_SYSTEM_PROMPT = (
    "You are a capable autonomous agent working on a long task. Plan with the goal tool, "
    "act with the other tools, check your work, and finish with a clear final answer "
    "(a message without tool calls)."
)


class Preset(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    allowed_tools: list[str] | None = None
    """``None``: every registered tool but a shared MCP server's. Entries may be shell
    patterns (``files__*``: every tool of the MCP server ``files``), as may ``denied_tools``.
    A shared server's tool is offered only when an entry names its server (``docs__*``,
    ``docs__search``): a bare ``*`` does not."""
    denied_tools: list[str] = Field(default_factory=list)
    read_only: bool = False
    max_iterations: int | None = None
    temperature: float | None = None
    model_params: dict[str, Any] | None = None
    """Defaults for ``ModelParams`` (temperature, top_p, max_tokens, seed, stop,
    tool_choice); a trace's own ``model_params`` win field by field."""
    model_fallback: list[str] | None = None
    """The fallback chain of a trace running this preset that names none of its own."""
    skills: list[str] = Field(default_factory=list)
    allow_nesting: bool = False
    """A sub-trace running this preset keeps ``agent`` / ``evaluate`` (within the depth and
    descendant limits); otherwise sub-agents never get them."""
    approval_tools: list[str] | None = None
    """Tools whose calls wait for a person's decision (``["*"]``: all); a trace's own
    ``approval`` replaces this list."""
    experiences: bool = True
    """A new trace starts with the experiences matching its task (``memory.recall``)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    extends: str | None = None

    @field_validator("model_params")
    @classmethod
    def _known_params(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                msgspec.convert(value, ModelParams)
            except msgspec.ValidationError as exc:
                raise ValueError(f"model_params: {exc}") from exc
        return value

    def params(self) -> ModelParams | None:
        return (
            None if self.model_params is None else msgspec.convert(self.model_params, ModelParams)
        )

    def select_tools(
        self, tools: ToolRegistry, config: TraceConfig, *, child: bool = False
    ) -> ToolRegistry:
        """The preset's tools, narrowed further by the trace's own ``tools`` / ``read_only``;
        a ``child`` (sub-trace) loses ``agent`` / ``evaluate`` unless ``allow_nesting``; the
        inbox tools are offered only to a trace created with ``messaging``."""
        names = tools.names()
        chosen = (
            tools if self.allowed_tools is None else tools.only(matching(names, self.allowed_tools))
        )
        chosen = chosen.without(matching(names, self.denied_tools))
        chosen = chosen.without(unnamed_shared(tools, self.allowed_tools or []))
        if not config.messaging:
            chosen = chosen.without(MESSAGING_TOOLS)
        if child and not self.allow_nesting:
            chosen = chosen.without(NESTING_TOOLS)
        if config.tools is not None:
            chosen = chosen.only(config.tools)
        if self.read_only or config.read_only:
            chosen = chosen.read_only()
        return chosen


def matching(names: list[str], patterns: list[str]) -> list[str]:
    """The ``names`` some entry of ``patterns`` (a name or a shell pattern) matches."""
    return [name for name in names if any(fnmatch.fnmatchcase(name, p) for p in patterns)]


def unnamed_shared(tools: ToolRegistry, patterns: list[str]) -> list[str]:
    """Tools of shared MCP servers (one process for every key) that no entry of ``patterns``
    both matches and names by its server's prefix: they are never offered by default."""
    return [
        tool.name
        for tool in tools
        if tool.metadata.get("shared")
        and not any(
            p.startswith(f"{tool.metadata['server']}__") and fnmatch.fnmatchcase(tool.name, p)
            for p in patterns
        )
    ]


NESTING_TOOLS = ["agent", "evaluate"]
"""Tools that start sub-traces: a sub-trace gets them only if its preset allows nesting."""

READ_ONLY_TOOLS = ["read", "glob", "grep", "webfetch", "web_search", "skill", "workspace_read"]
"""``web_search`` is there only when configured (``tools.web_search``)."""

OPT_IN_TOOLS = ["view_image", "browser_*"]
"""Registered by executors, offered only by presets that name them (``browser``)."""

BUILTIN_PRESETS: dict[str, Preset] = {
    "default": Preset(
        name="default",
        description="every tool but the opt-in ones (view_image, browser_*)",
        denied_tools=OPT_IN_TOOLS,
    ),
    "browser": Preset(
        name="browser",
        description="the default tools plus a browser (navigate, snapshot, click, type, "
        "screenshot) and view_image; needs a model that takes images",
        system_prompt=DEFAULT_SYSTEM_PROMPT
        + (
            "\n\nYou can drive a web browser: browser_navigate opens a page, browser_snapshot "
            "reads it as text, browser_click and browser_type act on it, browser_screenshot "
            "and view_image show you images. The browser is closed when your turn ends."
        ),
        skills=["browser", "web"],
    ),
    "explore": Preset(
        name="explore",
        description="read-only investigation; answers with findings",
        allowed_tools=[*READ_ONLY_TOOLS, "goal"],
        read_only=True,
        max_iterations=30,
        system_prompt=(
            "You investigate a question without changing anything: read, search and fetch, "
            "then answer with concise findings and the evidence (paths, lines, URLs)."
        ),
    ),
    "analyst": Preset(
        name="analyst",
        description="reads and reasons; never writes files or runs commands",
        allowed_tools=[*READ_ONLY_TOOLS, "goal", "ask_human"],
        denied_tools=["bash", "write", "edit"],
        max_iterations=40,
        temperature=0.2,
        system_prompt=(
            "You are a careful analyst. Gather evidence with the read-only tools, weigh it, "
            "state assumptions, and give a structured, verifiable conclusion."
        ),
    ),
}


class PresetCatalog:
    """Built-in presets overlaid with user presets; unknown names fall back to ``default``."""

    def __init__(self, user: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self._presets = dict(BUILTIN_PRESETS)
        pending = dict(user or {})
        while pending:
            progressed = False
            for name, raw in list(pending.items()):
                base_name = raw.get("extends")
                if base_name is not None and base_name in pending and base_name != name:
                    continue
                if base_name is not None and base_name not in self._presets:
                    raise ValueError(f"preset {name!r} extends unknown preset {base_name!r}")
                base = self._presets.get(base_name or "", None)
                fields = base.model_dump(exclude={"name", "extends"}) if base else {}
                fields.update(raw)
                self._presets[name] = Preset.model_validate({**fields, "name": name})
                del pending[name]
                progressed = True
            if not progressed:
                raise ValueError(f"presets extend each other in a cycle: {sorted(pending)}")

    def get(self, name: str | None) -> Preset:
        return self._presets.get(name or "default") or self._presets["default"]

    def __contains__(self, name: object) -> bool:
        return name in self._presets

    def names(self) -> list[str]:
        return list(self._presets)
