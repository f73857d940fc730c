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


def context_key(trace_id: str, digest: str) -> str:
    return f"context/{trace_id}/{digest}"


def context_keys(trace_id: str, digest: str) -> tuple[str, str]:
    """Where a recorded context may be, in the order to read: the trace's own entry, then the
    shared one of a trace recorded before contexts were per trace."""
    return context_key(trace_id, digest), f"context/{digest}"


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
        for key in context_keys(turn.trace_id, recorded.hash):
            data = await workspace.get(key)
            if data is not None:
                apply(turn, msgspec.json.decode(data, type=RunContext))
                return
        log.warning("trace %s: recorded context %s is missing", turn.trace_id, recorded.hash)
    context = resolved(turn)
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
