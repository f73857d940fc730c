"""Tools: the ``@tool`` decorator, the registry, the context and the built-ins."""

from longhaul.agent.tools.base import Tool, tool
from longhaul.agent.tools.builtin import BUILTIN_TOOLS, builtin_tools
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.registry import ToolRegistry
from longhaul.agent.tools.result import Attachment, Deferred, ToolReply, ToolResult
from longhaul.agent.tools.settings import ToolSettings

__all__ = [
    "BUILTIN_TOOLS",
    "Attachment",
    "Deferred",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolReply",
    "ToolResult",
    "ToolSettings",
    "builtin_tools",
    "tool",
]
