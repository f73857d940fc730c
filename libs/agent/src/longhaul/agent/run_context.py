"""What the model saw is part of the trace.

The first turn records the context it resolved (system prompt, tool schemas, preset, skills,
parameters) in the workspace under ``context/<sha256>`` (stored once: the key is the content's
digest) and puts ``ContextRecorded`` on the log. Every later turn and run of the trace shows the
model that recorded context, not whatever today's config and presets would build, until a run
request changes the config (the fold then forgets it and the next turn records anew). Editing
a preset or the config never changes an old trace; a replay knows exactly what was shown.
"""

from __future__ import annotations

import hashlib
import logging

import msgspec
from longhaul.agent.turn import Turn
from longhaul.agent.turn_settings import pinned
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


def context_key(digest: str) -> str:
    return f"context/{digest}"


def resolved(turn: Turn) -> RunContext:
    """The context today's config and presets give (``turn_settings.resolve`` made it)."""
    return RunContext(
        system_prompt=turn.system_prompt,
        tools=list(turn.tools.specs()),
        preset=turn.preset.name,
        skills=turn.skills.names(),
        model=turn.state.config.model,
        model_params=turn.model_params,
        temperature=turn.temperature,
        max_iterations=turn.max_iterations,
    )


async def pin_context(turn: Turn) -> None:
    """Show the model the recorded context, or record the one just resolved."""
    workspace = turn.env.workspace
    if workspace is None:  # nowhere to keep it: the context stays as resolved
        return
    recorded = turn.state.context
    if recorded is not None:
        data = await workspace.get(context_key(recorded.hash))
        if data is not None:
            apply(turn, msgspec.json.decode(data, type=RunContext))
            return
        log.warning("trace %s: recorded context %s is missing", turn.trace_id, recorded.hash)
    context = resolved(turn)
    data = msgspec.json.encode(context)
    digest = hashlib.sha256(data).hexdigest()
    if await workspace.get(context_key(digest)) is None:
        await workspace.put(context_key(digest), data)
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


def apply(turn: Turn, context: RunContext) -> None:
    turn.settings = pinned(
        turn.settings,
        turn.all_tools,
        turn.env.skills,
        system_prompt=context.system_prompt,
        tools=context.tools,
        skill_names=context.skills,
        model_params=context.model_params,
        temperature=context.temperature,
        max_iterations=context.max_iterations,
    )
