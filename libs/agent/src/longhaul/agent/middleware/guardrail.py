"""Guardrail (wrap_tool_call): terminal security for ``bash`` and the file tools.

Before a call: the command against the policy's deny list (and allow list, when set), every
path argument against the working-directory jail. After: output beyond the cap is cut. The
tools jail themselves too; checking here as well means a custom file tool that declares its
``path_params`` gets the jail without writing it.
"""

from __future__ import annotations

from dataclasses import replace

from longhaul.agent.errors import ToolError
from longhaul.agent.guardrail_policy import GuardrailPolicy
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.middleware.base import Middleware, ToolHandler
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
        arguments = invocation.arguments()
        if tool.name in SHELL_TOOLS:
            refusal = self.policy.refusal(str(arguments.get("command", "")))
            if refusal:
                raise ToolError(refusal, code="guardrail_denied")
        for param in tool.path_params:
            value = arguments.get(param)
            if isinstance(value, str):
                jailed(invocation.ctx.working_dir, value)
        reply = await call_next(invocation)
        if isinstance(reply, ToolResult):
            capped = self.policy.cap(reply.output)
            if capped is not reply.output:
                reply = replace(reply, output=capped)
        return reply
