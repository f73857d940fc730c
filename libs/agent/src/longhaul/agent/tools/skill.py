"""``skill``: load one playbook from the skills index into the conversation."""

from __future__ import annotations

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.result import ToolResult


@tool(read_only=True)
async def skill(ctx: ToolContext, name: str) -> ToolResult:
    """Load a skill (a playbook listed in the system prompt) and follow it.

    Args:
        name: the skill's name as listed.
    """
    found = ctx.skills.get(name)
    if found is None:
        available = ", ".join(ctx.skills.names()) or "none"
        raise ToolError(f"unknown skill {name!r}; available: {available}", code="not_found")
    return ToolResult(output=found.body(), title=f"skill {name}")
