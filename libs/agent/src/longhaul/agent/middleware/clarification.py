"""Clarification (wrap_tool_call, innermost): ``ask_human`` ends the turn and waits.

The call is deferred: the engine emits ``Waiting(reason="human", tool_call_id=…)`` after the
model turn's other calls, and when the reply arrives (``HumanReplied``) the next turn appends
it as this call's result.
"""

from __future__ import annotations

from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.middleware.base import Middleware, ToolHandler
from longhaul.agent.tools.result import Deferred, ToolReply
from longhaul.agent.turn import Turn

ASK_HUMAN = "ask_human"


class Clarification(Middleware):
    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        if invocation.name != ASK_HUMAN or invocation.tool is None:
            return await call_next(invocation)
        question = str(invocation.arguments().get("question", ""))
        return Deferred("human", detail=question)
