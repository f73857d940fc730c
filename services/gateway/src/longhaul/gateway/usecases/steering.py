"""Steer a running trace: continue, rewind, stop, resume, answer a person's wait, decide a
tool call, hand back client tool results, reflect, compact.

Each is one event, built from the trace's fresh fold and checked against it
(:func:`commands.append_to_trace`); the executor reacts to it. The answer is the fold the
event applied to and the event's sequence on the log.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from longhaul.core.index import TraceIndexEntry
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway import access, commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.edited_calls import check_edited_arguments
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import (
    RUN_CHANGES,
    ApproveRequest,
    RunRequest,
    ToolResultsRequest,
)
from longhaul.gateway.usecases.start import check_model, message_inputs

Steered = tuple[TraceState, int]
"""The trace's fold with the request applied, and the request's event id."""


async def steer(
    runtime: Runtime,
    principal: Principal,
    trace_id: str,
    build: Callable[[TraceState], ev.TraceEvent],
) -> Steered:
    """Append the event ``build`` makes from the trace's fold (checked against it)."""
    state, recorded = await commands.append_to_trace(runtime, principal, trace_id, build)
    # read-your-writes: an answered wait leaves this gateway's inbox at once
    runtime.mirror.put(TraceIndexEntry.from_state(state))
    return state, recorded.seq


async def continue_run(
    runtime: Runtime, principal: Principal, trace_id: str, body: RunRequest
) -> Steered:
    """Continue with new messages, rewind (``after_sequence``) or regenerate, optionally on
    another model or parameters."""
    settings = body.settings()
    check_model(runtime, settings.model)
    inputs = await message_inputs(runtime, principal, body.messages)
    changes = {
        name: getattr(settings, name) for name in RUN_CHANGES if getattr(settings, name) is not None
    }

    def build(state: TraceState) -> ev.RunRequested:
        # the run's config is on its own event, so a replay or a later continue uses it too
        config = msgspec.structs.replace(state.config, **changes) if changes else None
        return ev.RunRequested(messages=inputs, after_sequence=body.after_sequence, config=config)

    return await steer(runtime, principal, trace_id, build)


async def stop(runtime: Runtime, principal: Principal, trace_id: str) -> Steered:
    return await steer(runtime, principal, trace_id, lambda _: ev.StopRequested(reason="user"))


async def resume(runtime: Runtime, principal: Principal, trace_id: str) -> Steered:
    return await steer(runtime, principal, trace_id, lambda _: ev.RunRequested())


async def reply(runtime: Runtime, principal: Principal, trace_id: str, content: str) -> Steered:
    return await steer(
        runtime,
        principal,
        trace_id,
        lambda _: ev.HumanReplied(content=content, by=principal.owner),
    )


async def decide_call(
    runtime: Runtime, principal: Principal, trace_id: str, body: ApproveRequest
) -> Steered:
    """Approve or deny one pending call; edited ``arguments`` must fit the tool's recorded
    schema (422 ``invalid_arguments``)."""
    if body.arguments is not None:
        state = await access.owned_trace(runtime, principal, trace_id)
        await check_edited_arguments(runtime, state, body.tool_call_id, body.arguments)
    return await steer(
        runtime,
        principal,
        trace_id,
        lambda _: ev.ToolDecided(
            tool_call_id=body.tool_call_id,
            approved=body.approved,
            reason=body.reason or "",
            took_effect=body.took_effect,
            arguments=body.arguments,
            by=principal.owner,
        ),
    )


async def post_tool_results(
    runtime: Runtime, principal: Principal, trace_id: str, body: ToolResultsRequest
) -> Steered:
    results = [
        ev.ClientToolResult(tool_call_id=r.tool_call_id, content=r.content, is_error=r.is_error)
        for r in body.results
    ]
    return await steer(
        runtime, principal, trace_id, lambda _: ev.ToolResultsPosted(results=results)
    )


async def reflect(
    runtime: Runtime, principal: Principal, trace_id: str, focus: str | None
) -> Steered:
    return await steer(runtime, principal, trace_id, lambda _: ev.ReflectRequested(focus=focus))


async def compact(runtime: Runtime, principal: Principal, trace_id: str) -> Steered:
    return await steer(runtime, principal, trace_id, lambda _: ev.CompactRequested())
