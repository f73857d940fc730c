"""Tools: the ``@tool`` decorator, the registry, the context and the built-ins.

Names load on first use, so importing one light module of the package (``childproc``, for a
process that only starts children) does not import every tool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from longhaul.agent.lazy import lazy_getattr

if TYPE_CHECKING:
    from longhaul.agent.tools.base import Tool, tool
    from longhaul.agent.tools.builtin import BUILTIN_TOOLS, builtin_tools
    from longhaul.agent.tools.context import ToolContext
    from longhaul.agent.tools.registry import ToolRegistry
    from longhaul.agent.tools.result import Attachment, Deferred, ToolReply, ToolResult
    from longhaul.agent.tools.settings import ToolSettings

_HOME = {
    "Attachment": "longhaul.agent.tools.result",
    "BUILTIN_TOOLS": "longhaul.agent.tools.builtin",
    "Deferred": "longhaul.agent.tools.result",
    "Tool": "longhaul.agent.tools.base",
    "ToolContext": "longhaul.agent.tools.context",
    "ToolRegistry": "longhaul.agent.tools.registry",
    "ToolReply": "longhaul.agent.tools.result",
    "ToolResult": "longhaul.agent.tools.result",
    "ToolSettings": "longhaul.agent.tools.settings",
    "builtin_tools": "longhaul.agent.tools.builtin",
    "tool": "longhaul.agent.tools.base",
}
__all__ = sorted(_HOME)

__getattr__ = lazy_getattr(__name__, _HOME)
