"""A turn's settings as one frozen value: resolved once, pinned, read everywhere.

What a turn runs with comes from three places — the trace's own config (``TraceConfig``, set
at creation or by a run request), its preset, and the pipeline's defaults — and, once the
trace has recorded what the model saw (``run_context``), from that record. The engine resolves
them once at the start of a turn (:func:`resolve`), the recorded context pins them
(:func:`pinned`), and ``run_context.settle`` sets ``turn.settings`` once, before any hook:
middleware and tools read ``turn.settings``, never ``state.config``. The rules for the limits
a client can see (:func:`max_iterations`) are shared with the gateway, so
``GET /api/traces/{id}`` shows the limit that applies, not only the one the client asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from longhaul.agent.env import AgentEnv
from longhaul.agent.presets import Preset
from longhaul.agent.skills import SkillIndex
from longhaul.agent.tools.client import is_client_tool, with_client_tools
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.workdir import trace_working_dir
from longhaul.domain.config import PipelineConfig
from longhaul.domain.events import ModelParams, OutputSchema, TraceConfig
from longhaul.domain.state import TraceState
from longhaul.llm.types import ToolSpec


def max_iterations(config: TraceConfig, preset: Preset, pipeline: PipelineConfig) -> int:
    """The trace's own limit, else its preset's, else the pipeline's."""
    return config.max_iterations or preset.max_iterations or pipeline.max_iterations


@dataclass(frozen=True)
class TurnSettings:
    """Every setting the engine, its middleware and tools read during a turn: none of them
    reads ``state.config`` (which a run request may change for the next run)."""

    preset: Preset
    tools: ToolRegistry
    """The tools offered this turn (a subset of the executor's)."""
    skills: SkillIndex
    working_dir: Path
    system_prompt: str
    max_iterations: int
    max_continuations: int
    temperature: float | None
    model_params: ModelParams
    model: str | None = None
    """The trace's own model string (``None``: the executor's default), as recorded."""
    max_tokens: int | None = None
    max_cost: float | None = None
    on_limit: Literal["stop", "ask"] = "stop"
    """At ``max_tokens`` / ``max_cost``: stop, or wait for a raise (``budget``)."""
    approval: tuple[str, ...] = ()
    """Tools whose calls wait for a person (the trace's list, else its preset's)."""
    auto_execute_tools: bool = True
    messaging: bool = False
    experiences: bool = True
    """Recall experiences at the start and capture them at the end (the trace's choice, else
    its preset's)."""
    verification: dict[str, Any] | None = None
    output_schema: OutputSchema | None = None
    """The final answer must be JSON matching it (sent to the provider in its form)."""
    tool_specs: tuple[ToolSpec, ...] | None = None
    """The schemas shown to the model when a recorded context fixes them."""


async def resolve(
    state: TraceState,
    env: AgentEnv,
    pipeline: PipelineConfig,
    all_tools: ToolRegistry,
    *,
    has_experiences: Callable[[], Awaitable[bool]],
) -> TurnSettings:
    """What today's config and presets give the trace. ``get_experience`` is offered only
    when ``has_experiences()`` (asked only then) or a recorded context says so."""
    config = state.config
    preset = env.presets.get(config.preset)
    child = state.parent_trace_id is not None
    tools = with_client_tools(
        preset.select_tools(all_tools, config, child=child), config.client_tools
    )
    if "get_experience" in tools and state.context is None and not await has_experiences():
        tools = tools.without(["get_experience"])
    # The trace's own list (POST /api/traces, agent(skills=…)) first, then the preset's, then
    # every skill.
    skills = env.skills.only(config.skills or preset.skills)
    working_dir = trace_working_dir(env.working_root, state, config.working_dir)
    parts = [
        config.system_prompt or preset.system_prompt,
        f"Working directory: {working_dir} (file tools take paths relative to it).",
    ]
    if "skill" in tools:
        parts.append(skills.render())
    return TurnSettings(
        preset=preset,
        tools=tools,
        skills=skills,
        working_dir=working_dir,
        system_prompt="\n\n".join(part for part in parts if part),
        max_iterations=max_iterations(config, preset, pipeline),
        max_continuations=pipeline.max_continuations,
        temperature=config.temperature if config.temperature is not None else preset.temperature,
        model_params=(config.model_params or ModelParams()).over(preset.params()),
        model=config.model,
        max_tokens=config.max_tokens,
        max_cost=config.max_cost,
        on_limit=config.on_limit,
        approval=tuple(
            (preset.approval_tools if config.approval is None else config.approval) or ()
        ),
        auto_execute_tools=config.auto_execute_tools,
        messaging=config.messaging,
        experiences=preset.experiences if config.experiences is None else config.experiences,
        verification=config.verification,
        output_schema=config.output_schema,
    )


def pinned(
    settings: TurnSettings,
    all_tools: ToolRegistry,
    skills: SkillIndex,
    *,
    system_prompt: str,
    tools: list[ToolSpec],
    skill_names: list[str],
    model_params: ModelParams | None,
    temperature: float | None,
    max_iterations: int,
) -> TurnSettings:
    """``settings`` with what a recorded context fixed (``run_context``); the client's tools
    come from the trace's config, as resolved."""
    client = ToolRegistry(tool for tool in settings.tools if is_client_tool(tool))
    source = ToolRegistry([*all_tools.without(client.names()), *client])
    return dataclasses.replace(
        settings,
        system_prompt=system_prompt,
        tools=source.only(spec.name for spec in tools),
        tool_specs=tuple(tools),
        skills=skills.only(skill_names),
        model_params=model_params or ModelParams(),
        temperature=temperature,
        max_iterations=max_iterations or settings.max_iterations,
    )
