"""ToolApproval (wrap_tool_call, innermost framework layer): calls to the tools a trace (or its
preset) lists under ``approval`` wait for a person.

A call without a decision is deferred: the engine emits ``Waiting(reason="approval",
pending_calls=[…])`` after the model turn's other calls and the turn ends. ``ToolDecided``
events (``POST /api/traces/{id}/approve``) record each decision; once every pending call has
one the trace runs again, and the engine sends each decided call through the chain once more:
approved ones run, denied ones answer the model with the refusal and its reason. With
``auto_execute_tools: false`` no call runs here at all: each is handed to the client (a
``client_tools`` wait) and the result it posts is the call's answer. A call the effect ledger
found cut off by a crash is not gated again: the ledger resumes it, and a person's answer
about its unknown outcome (run again, took effect, failed) is turned into its result here.
The gate is a framework layer because a configuration that silently dropped it would run what
a person was promised to see first.
"""

from __future__ import annotations

from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import failure
from longhaul.agent.middleware.base import Middleware, ToolHandler
from longhaul.agent.middleware.clarification import ASK_HUMAN
from longhaul.agent.tools.result import Deferred, ToolReply, ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.events import ToolDecided
from longhaul.domain.state.effects import Effect

EVERY_TOOL = "*"


def needs_approval(turn: Turn, tool_name: str) -> bool:
    listed = turn.state.config.approval
    if listed is None:
        listed = turn.preset.approval_tools
    if not listed or tool_name == ASK_HUMAN:
        return False
    return EVERY_TOOL in listed or tool_name in listed


def _client_result(turn: Turn, invocation: ToolInvocation) -> ToolReply:
    """``auto_execute_tools: false``: the client runs the call; its posted result is the answer."""
    posted = turn.state.client_results.get(invocation.call.id)
    if posted is None:
        return Deferred("client_tools", detail=invocation.call.id)
    return ToolResult(
        output=posted.content, error_code="client_tool_error" if posted.is_error else None
    )


class ToolApproval(Middleware):
    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        if not turn.state.config.auto_execute_tools and invocation.name != ASK_HUMAN:
            return _client_result(turn, invocation)
        effect = turn.state.ledger.get(invocation.call.id)
        if effect is not None:  # it acted before a crash: the ledger resumes it (engine.effects)
            return await _cut_off(invocation, effect, call_next)
        if invocation.tool is None or not needs_approval(turn, invocation.name):
            return await call_next(invocation)
        decision = turn.state.tool_decisions.get(invocation.call.id)
        if decision is None:
            return Deferred("approval", detail=invocation.call.id)
        if decision.approved:
            return await call_next(invocation)
        return failure(
            "tool_denied",
            f"A person denied this {invocation.name} call{_why(decision)}. Do not call it "
            "again unless asked to; continue another way or explain what you could not do.",
        )


async def _cut_off(invocation: ToolInvocation, effect: Effect, call_next: ToolHandler) -> ToolReply:
    """A person's answer about a call whose outcome is unknown: it took effect (its answer
    is what the person said), it did not (the model decides what next), or run it again
    (the ledger does, with the same key). Without an answer the ledger decides who asks."""
    decision = effect.decision
    if decision is None or decision.approved:
        return await call_next(invocation)
    if decision.took_effect:
        return ToolResult(
            output=f"This {invocation.name} call was cut off by a crash; a person confirmed "
            f"it took effect{_why(decision)}."
        )
    return failure(
        "effect_failed",
        f"This {invocation.name} call was cut off by a crash and a person decided it did not "
        f"take effect{_why(decision)}. Decide whether to call it again.",
    )


def _why(decision: ToolDecided) -> str:
    return f": {decision.reason}" if decision.reason else ""
