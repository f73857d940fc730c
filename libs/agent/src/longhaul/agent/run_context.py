"""What the model saw is part of the trace.

The first turn records the context it resolved (system prompt, tool schemas, preset, skills,
parameters) in the workspace under ``context/<trace id>/<sha256>`` and puts ``ContextRecorded``
on the log. The entry is the trace's own, removed by its delete: the prompt embeds the working
directory, so no two traces would share one anyway (a trace recorded before keeps reading its
``context/<sha256>``). Every later turn and run of the trace shows the
model that recorded context, not whatever today's config and presets would build, until a run
request changes the config (the fold then forgets it and the next turn records anew). Editing
a preset or the config never changes an old trace; a replay knows exactly what was shown.
"""

from __future__ import annotations

import hashlib
import logging

import msgspec
from longhaul.agent.turn import Turn
from longhaul.agent.turn_settings import TurnSettings, pinned, resolve
from longhaul.domain.events import ContextRecorded, ModelParams
from longhaul.llm.types import ToolSpec

log = logging.getLogger(__name__)


class RunContext(msgspec.Struct, kw_only=True, omit_defaults=True):
    system_prompt: str
    tools: list[ToolSpec]
    preset: str
    skills: list[str] = msgspec.field(default_factory=list)
    model: str | None = None
    model_params: ModelParams | None = None
    temperature: float | None = None
    max_iterations: int = 0


def context_key(trace_id: str, digest: str) -> str:
    return f"context/{trace_id}/{digest}"


def context_keys(trace_id: str, digest: str) -> tuple[str, str]:
    """Where a recorded context may be, in the order to read: the trace's own entry, then the
    shared one of a trace recorded before contexts were per trace."""
    return context_key(trace_id, digest), f"context/{digest}"


def resolved(settings: TurnSettings) -> RunContext:
    """The context today's config and presets give (``turn_settings.resolve`` made it)."""
    return RunContext(
        system_prompt=settings.system_prompt,
        tools=list(settings.tools.specs()),
        preset=settings.preset.name,
        skills=settings.skills.names(),
        model=settings.model,
        model_params=settings.model_params,
        temperature=settings.temperature,
        max_iterations=settings.max_iterations,
    )


async def settle(turn: Turn) -> None:
    """Set ``turn.settings`` once: resolved from today's config and presets, then pinned to
    the context the trace recorded, or recorded now when it has none."""
    settings = await resolve(
        turn.state,
        turn.env,
        turn.config,
        turn.all_tools,
        has_experiences=turn.has_experiences,
    )
    workspace = turn.env.workspace
    if workspace is None:  # nowhere to keep it: the context stays as resolved
        turn.settings = settings
        return
    recorded = await _recorded(turn)
    if recorded is not None:
        turn.settings = _pinned(turn, settings, recorded)
        return
    turn.settings = settings
    context = resolved(settings)
    data = msgspec.json.encode(context)
    digest = hashlib.sha256(data).hexdigest()
    await workspace.put(context_key(turn.trace_id, digest), data)
    await turn.emit(
        [
            ContextRecorded(
                hash=digest,
                preset=context.preset,
                model=context.model,
                tools=[spec.name for spec in context.tools],
                skills=context.skills,
            )
        ]
    )


async def _recorded(turn: Turn) -> RunContext | None:
    """The context the trace recorded (``None``: none, or its entry is missing)."""
    recorded = turn.state.context
    workspace = turn.env.workspace
    if recorded is None or workspace is None:
        return None
    for key in context_keys(turn.trace_id, recorded.hash):
        data = await workspace.get(key)
        if data is not None:
            return msgspec.json.decode(data, type=RunContext)
    log.warning("trace %s: recorded context %s is missing", turn.trace_id, recorded.hash)
    return None


def _pinned(turn: Turn, settings: TurnSettings, context: RunContext) -> TurnSettings:
    return pinned(
        settings,
        turn.all_tools,
        turn.env.skills,
        system_prompt=context.system_prompt,
        tools=context.tools,
        skill_names=context.skills,
        model_params=context.model_params,
        temperature=context.temperature,
        max_iterations=context.max_iterations,
    )
