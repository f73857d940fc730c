"""``workspace_read``: read a workspace entry (offloaded outputs, phase results, attachments)."""

from __future__ import annotations

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.result import ToolResult


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
    value = await ctx.workspace.get(key)
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
