"""``ToolInvocation``: one tool call on its way through the ``wrap_tool_call`` chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import Tool
from longhaul.agent.tools.context import ToolContext
from longhaul.llm.arguments import InvalidToolArguments, parse_arguments
from longhaul.llm.types import ToolCall


@dataclass
class ToolInvocation:
    call: ToolCall
    tool: Tool | None
    """``None`` when the model named a tool this trace does not have."""
    ctx: ToolContext
    _arguments: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.call.name

    def arguments(self) -> dict[str, Any]:
        """The decoded arguments; non-JSON text raises ``ToolError("tool_call_invalid")``."""
        if self._arguments is None:
            try:
                self._arguments = parse_arguments(self.call.arguments)
            except InvalidToolArguments as exc:
                raise ToolError(
                    f"arguments of {self.name} are not a JSON object ({exc.reason}); "
                    "send the call again with valid JSON",
                    code="tool_call_invalid",
                ) from exc
        return self._arguments
