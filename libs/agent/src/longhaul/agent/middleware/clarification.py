"""Clarification (wrap_tool_call, innermost): ``ask_human`` ends the turn and waits.

The call is deferred: the engine emits ``Waiting(reason="human", tool_call_id=…)`` after the
model turn's other calls, and when the reply arrives (``HumanReplied``) the next turn appends
it as this call's result. With ``pipeline.approval.question_deadline_s`` the wait carries a
deadline (``longhaul.domain.approval_rules``).
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
        rules = turn.config.approval
        return Deferred(
            "human",
            detail=question,
            deadline_s=rules.question_deadline_s,
            on_deadline=rules.on_deadline,
        )
