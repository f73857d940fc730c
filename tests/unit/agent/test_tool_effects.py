"""Every tool declares what it does outside the trace: the built-ins as annotated, MCP tools
by their server's hints (the worst when it gives none), your own by ``@tool(effects=…)``."""

from __future__ import annotations

import mcp_types
import pytest
from longhaul.agent.tools import builtin_tools, tool
from longhaul.agent.tools.catalogue import describe
from longhaul.agent.tools.mcp_tools import _effects


def test_the_builtins_are_annotated() -> None:
    tools = builtin_tools()
    effects = {name: tools.get(name).effect for name in tools.names()}  # type: ignore[union-attr]
    assert effects["read"] == effects["grep"] == effects["goal"] == "none"
    assert effects["write"] == effects["agent"] == effects["evaluate"] == "idempotent"
    assert effects["bash"] == effects["edit"] == "unsafe"
    assert describe(tools.get("write"), tools.names()).effects == "idempotent"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, "unsafe"),
        (mcp_types.ToolAnnotations(), "unsafe"),
        (mcp_types.ToolAnnotations(read_only_hint=True), "none"),
        (mcp_types.ToolAnnotations(idempotent_hint=True), "idempotent"),
        (mcp_types.ToolAnnotations(destructive_hint=True), "unsafe"),
    ],
)
def test_an_mcp_tool_follows_its_servers_hints(
    annotations: mcp_types.ToolAnnotations | None, expected: str
) -> None:
    remote = mcp_types.Tool(name="t", input_schema={"type": "object"}, annotations=annotations)
    assert _effects(remote) == expected


def test_your_own_tool_declares_or_gets_the_default() -> None:
    @tool(effects="idempotent")
    def charge(amount: int) -> str:
        """Charge."""
        return "ok"

    @tool(read_only=True)
    def look(q: str) -> str:
        """Look."""
        return q

    @tool
    def act(q: str) -> str:
        """Act."""
        return q

    assert (charge.effect, look.effect, act.effect) == ("idempotent", "none", "unsafe")
