"""Approving a call with edited arguments: they must fit the schema the model was shown.

The schema comes from the trace's recorded context (``context/<hash>`` in the workspace: what
the model was offered, whatever the executors offer today), validated with the untrusted
schema validator (an MCP server wrote some of those schemas: nothing is fetched, patterns run
in linear time). A call that does not fit is refused with 422 ``invalid_arguments`` naming
each problem, and nothing reaches the log; the executor checks once more before it runs.
"""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.agent.run_context import context_keys
from longhaul.domain.state import TraceState
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.llm.untrusted_schema import UntrustedSchemaError, untrusted_validator

MAX_PROBLEMS = 20


def _invalid(message: str, details: Any = None) -> ApiError:
    return ApiError(422, "invalid_arguments", message, details=details)


async def recorded_context(runtime: Runtime, state: TraceState) -> dict[str, Any] | None:
    """What the trace's model was shown (system prompt, tool schemas, …); None when no
    context is recorded yet or it is not stored."""
    if state.context is None:
        return None
    async with runtime.nats_call():
        for key in context_keys(state.trace_id, state.context.hash):
            entry = await runtime.service.workspace.get(key)
            if entry is not None:
                return dict(msgspec.json.decode(entry.value))
    return None


async def tool_schema(runtime: Runtime, state: TraceState, tool_call_id: str) -> dict[str, Any]:
    """The JSON schema of the tool the pending call names, as the trace recorded it."""
    call = next((c for c in state.unanswered_tool_calls() if c.id == tool_call_id), None)
    if call is None or tool_call_id not in state.approval_pending:
        raise ApiError(409, "conflict", f"tool call {tool_call_id} does not wait for approval")
    context = await recorded_context(runtime, state)
    if context is None:
        raise ApiError(409, "conflict", f"trace {state.trace_id} has recorded no tool schemas")
    for spec in context.get("tools", []):
        if spec.get("name") == call.function.name:
            return dict(spec.get("parameters") or {"type": "object"})
    raise _invalid(f"tool {call.function.name!r} has no recorded schema to check against")


async def check_edited_arguments(
    runtime: Runtime, state: TraceState, tool_call_id: str, arguments: dict[str, Any]
) -> None:
    """422 ``invalid_arguments`` unless ``arguments`` fit the pending call's tool schema."""
    schema = await tool_schema(runtime, state, tool_call_id)
    try:
        validator = untrusted_validator(schema)
    except UntrustedSchemaError as exc:
        raise _invalid(f"the tool's schema cannot be used to check edits: {exc}") from exc
    problems = [
        {"path": "$" + "".join(f"[{p!r}]" for p in error.absolute_path), "error": error.message}
        for error in validator.iter_errors(arguments)
    ][:MAX_PROBLEMS]
    if problems:
        raise _invalid(
            "edited arguments do not fit the tool's schema; nothing was recorded", problems
        )
