"""Guardrail (wrap_tool_call): terminal security for ``bash`` and the file tools.

Before a call: the command against the policy's deny list (and allow list, when set), every
path argument against the working-directory jail — the model's arguments and, when a person
approved the call with edited ones (``ToolApproval``, further in), those too. After: output
beyond the cap is cut. The tools jail themselves too; checking here as well means a custom
file tool that declares its ``path_params`` gets the jail without writing it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from longhaul.agent.errors import ToolError
from longhaul.agent.guardrail_policy import GuardrailPolicy
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.middleware.base import Middleware, ToolHandler
from longhaul.agent.tools.base import Tool
from longhaul.agent.tools.jail import jailed
from longhaul.agent.tools.result import ToolReply, ToolResult
from longhaul.agent.turn import Turn

SHELL_TOOLS = frozenset({"bash"})


class Guardrail(Middleware):
    def __init__(self, policy: GuardrailPolicy | None = None) -> None:
        self.policy = policy or GuardrailPolicy()

    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        tool = invocation.tool
        if tool is None or (tool.name not in SHELL_TOOLS and not tool.path_params):
            return await call_next(invocation)
        # a person's edit of the call (approval) runs instead of the model's arguments, inside
        # this layer: both are checked, so an edit never gets past the policy
        edited = turn.state.approvals.edited.get(invocation.call.id)
        for arguments in (invocation.arguments(), *([edited] if edited is not None else [])):
            self._check(tool, invocation.ctx.working_dir, arguments)
        reply = await call_next(invocation)
        if isinstance(reply, ToolResult):
            capped = self.policy.cap(reply.output)
            if capped is not reply.output:
                reply = replace(reply, output=capped)
        return reply

    def _check(self, tool: Tool, working_dir: Path, arguments: dict[str, Any]) -> None:
        if tool.name in SHELL_TOOLS:
            refusal = self.policy.refusal(str(arguments.get("command", "")))
            if refusal:
                raise ToolError(refusal, code="guardrail_denied")
        for param in tool.path_params:
            value = arguments.get(param)
            if isinstance(value, str):
                jailed(working_dir, value)
