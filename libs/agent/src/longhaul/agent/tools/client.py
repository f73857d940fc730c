"""Tools a client defines and runs itself (``TraceConfig.client_tools``, ``/v1`` ``tools``).

Each is offered to the model with the client's schema (checked like any tool's arguments); a
call never runs here: the approval gate hands it to the client (a ``client_tools`` wait) and
the result the client posts is its answer. A client tool named like one of the trace's own
replaces it: the client said what that name means for this trace.
"""

from __future__ import annotations

from typing import Any

from longhaul.agent.tools.base import Tool
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.result import Deferred
from longhaul.agent.tools.schema import ArgsModel
from longhaul.domain.events import ClientTool
from pydantic import ConfigDict

CLIENT = "client"


class _ClientArguments(ArgsModel):
    """Checked against the client's JSON schema, not a pydantic model."""

    model_config = ConfigDict(extra="allow")


def _handed_over(**_: Any) -> Deferred:
    return Deferred("client_tools")


def client_tool(spec: ClientTool) -> Tool:
    return Tool(
        name=spec.name,
        description=spec.description,
        fn=_handed_over,
        arguments=_ClientArguments,
        input_schema=spec.parameters,
        wants_context=False,
        metadata={CLIENT: True},
    )


def is_client_tool(tool: Tool | None) -> bool:
    return tool is not None and bool(tool.metadata.get(CLIENT))


def with_client_tools(tools: ToolRegistry, specs: list[ClientTool] | None) -> ToolRegistry:
    """``tools`` and the client's (a client tool replaces a tool of the same name)."""
    if not specs:
        return tools
    merged = ToolRegistry(tools)
    for spec in specs:
        merged.put(client_tool(spec))
    return merged
