"""``get_experience``: the key's experiences that match an intent and/or a state, on demand.

Offered only to a trace whose key has experiences (``turn_settings.resolve`` drops it
otherwise), so a deployment without any sees no extra tool.
"""

from __future__ import annotations

from longhaul.agent.errors import ToolError
from longhaul.agent.experiences import describe
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.result import ToolResult
from longhaul.domain.experiences import rank

MATCHES = 5


@tool(read_only=True)
async def get_experience(
    ctx: ToolContext, intent: list[str] | None = None, state: list[str] | None = None
) -> ToolResult:
    """Look up rules learned on earlier runs that match what you are doing. Cite an
    experience's id when you rely on it.

    Args:
        intent: what you are trying to do, as short tags (e.g. code_search, web_research).
        state: the situation you are in, as short tags (e.g. python_repo, no_network).
    """
    if ctx.experiences is None:
        raise ToolError("no experience store is attached", code="not_available")
    if not intent and not state:
        raise ToolError("give at least one intent or state tag", code="invalid_arguments")
    pool = await ctx.experiences.list(ctx.state.owner)
    found = rank(pool, intent=intent or (), state=state or (), limit=MATCHES)
    return ToolResult(output=describe(found), title=f"{len(found)} experience(s)")
