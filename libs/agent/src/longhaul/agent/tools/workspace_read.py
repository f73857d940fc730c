"""``workspace_read``: read a workspace entry (offloaded outputs, phase results, attachments).

The workspace is shared by every key, so a trace reads only its own family's entries: the
outputs, attachments and uploads of itself, its parent, its root and its sub-traces, and its
task's results. Those all have the trace's owner by construction (the family inherits it), so
a trace id learned elsewhere never opens another key's output; a refused key reads as missing.
"""

from __future__ import annotations

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.result import ToolResult
from longhaul.domain.state import TraceState

TRACE_FAMILIES = ("outputs", "trace", "uploads")
"""Key families whose second segment is a trace id."""


def readable(state: TraceState, key: str) -> bool:
    """Whether the trace ``state`` may read workspace ``key`` (see the module doc)."""
    parts = [part for part in key.split("/") if part]
    if len(parts) < 3 or any(part in (".", "..") for part in parts):
        return False
    family, scope = parts[0], parts[1]
    if family in TRACE_FAMILIES:
        family_ids = {state.trace_id, state.parent_trace_id, state.root_trace_id}
        return scope in family_ids or scope in state.subtraces
    return family == "task" and scope == state.task_id


@tool(read_only=True)
async def workspace_read(
    ctx: ToolContext, key: str, offset: int = 0, length: int | None = None
) -> ToolResult:
    """Read a shared workspace entry as text (a stored large tool output, a phase result…).

    Args:
        key: the workspace key, e.g. outputs/<trace>/<call> or task/<id>/phase/<pid>/output.
        offset: character offset to start from (for long entries).
        length: characters to read (at most the output cap, which is also the default).
    """
    if ctx.workspace is None:
        raise ToolError("no workspace is attached to this trace", code="not_available")
    value = await ctx.workspace.get(key) if readable(ctx.state, key) else None
    if value is None:
        raise ToolError(f"workspace key {key!r} does not exist", code="not_found")
    text = value.decode("utf-8", errors="replace")
    cap = ctx.settings.output_cap
    if offset < 0 or (length is not None and length < 1):
        raise ToolError("offset must be >= 0 and length >= 1", code="invalid_arguments")
    size = min(length or cap, cap)
    chunk = text[offset : offset + size]
    rest = len(text) - offset - len(chunk)
    if rest > 0:
        chunk += (
            f"\n… {rest} more characters of {len(text)} "
            f"(continue with offset={offset + len(chunk)})"
        )
    return ToolResult(
        output=chunk,
        title=f"workspace {key}",
        long_term_memory=f"read workspace {key} from offset {offset}",
        include_output_only_once=True,
    )
