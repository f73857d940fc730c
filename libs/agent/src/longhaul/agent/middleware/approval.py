"""ToolApproval (wrap_tool_call, innermost framework layer): calls to the tools a trace (or its
preset) lists under ``approval``, and calls a configured risk rule says to ask about
(``pipeline.approval``, ``longhaul.domain.approval_rules``), wait for a person.

A call without a decision is deferred: the engine emits ``Waiting(reason="approval",
pending_calls=[…])`` after the model turn's other calls and the turn ends. ``ToolDecided``
events (``POST /api/traces/{id}/approve``) record each decision; once every pending call has
one the trace runs again, and the engine sends each decided call through the chain once more:
approved ones run (with the person's edited arguments when they gave some), denied ones
answer the model with the refusal and its reason. With
``auto_execute_tools: false`` no call runs here at all: each is handed to the client (a
``client_tools`` wait) and the result it posts is the call's answer, as for every call of a
tool the client defined itself (``client_tools``). A call the effect ledger
found cut off by a crash is not gated again: the ledger resumes it, and a person's answer
about its unknown outcome (run again, took effect, failed) is turned into its result here.
The gate is a framework layer because a configuration that silently dropped it would run what
a person was promised to see first.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from longhaul.agent.errors import ToolError
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import failure
from longhaul.agent.middleware.base import Middleware, ToolHandler
from longhaul.agent.middleware.clarification import ASK_HUMAN
from longhaul.agent.tools.client import is_client_tool
from longhaul.agent.tools.result import Deferred, ToolReply, ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.events import ToolDecided
from longhaul.domain.messages import ToolCall
from longhaul.domain.state.effects import Effect

EVERY_TOOL = "*"


def approval_wait(turn: Turn, invocation: ToolInvocation) -> Deferred | None:
    """The wait a call needs before it runs, or None: the trace's (else its preset's) list
    names the tool, or the first of the configured risk rules matching it says ``ask``."""
    tool = invocation.tool
    if tool is None or invocation.name == ASK_HUMAN:
        return None
    listed = turn.settings.approval
    rules = turn.config.approval
    rule = rules.rule_for(invocation.name, _arguments(invocation), tool.read_only)
    if not (listed and (EVERY_TOOL in listed or invocation.name in listed)):
        if rule is None or rule.action != "ask":
            return None
    deadline_s, action = rules.approval_deadline(rule)
    return Deferred(
        "approval", detail=invocation.call.id, deadline_s=deadline_s, on_deadline=action
    )


def _arguments(invocation: ToolInvocation) -> dict[str, Any]:
    try:
        return invocation.arguments()
    except ToolError:  # not JSON: schema validation answered it before it got here
        return {}


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
        handed_over = not turn.settings.auto_execute_tools and invocation.name != ASK_HUMAN
        if handed_over or is_client_tool(invocation.tool):
            return _client_result(turn, invocation)
        edited = turn.state.approvals.edited.get(invocation.call.id)
        if edited is None:
            return await _gate(turn, invocation, call_next)
        return await _edited(turn, invocation, edited, call_next)


async def _gate(turn: Turn, invocation: ToolInvocation, call_next: ToolHandler) -> ToolReply:
    effect = turn.state.ledger.get(invocation.call.id)
    if effect is not None:  # it acted before a crash: the ledger resumes it (engine.effects)
        return await _cut_off(invocation, effect, call_next)
    wait = approval_wait(turn, invocation)
    if wait is None:
        return await call_next(invocation)
    decision = turn.state.tool_decisions.get(invocation.call.id)
    if decision is None:
        return wait
    if decision.approved:
        return await call_next(invocation)
    return failure(
        "tool_denied",
        f"A person denied this {invocation.name} call{_why(decision)}. Do not call it "
        "again unless asked to; continue another way or explain what you could not do.",
    )


async def _edited(
    turn: Turn, invocation: ToolInvocation, edited: dict[str, Any], call_next: ToolHandler
) -> ToolReply:
    """The call with the arguments a person approved instead of the model's, through the
    gate and the effect ledger as any call (so a run again after a crash uses them too);
    checked again here against the tool's schema (the gateway checked the recorded one), and
    the model is told what ran."""
    tool = invocation.tool
    errors = [e.message for e in tool.validator.iter_errors(edited)] if tool else []
    if errors:
        return failure(
            "tool_call_invalid",
            f"A person approved this {invocation.name} call with edited arguments that do "
            f"not fit its schema ({'; '.join(errors)}); it did not run.",
        )
    text = json.dumps(edited, ensure_ascii=False, sort_keys=True)
    call = ToolCall.of(invocation.call.id, invocation.name, text)
    reply = await _gate(turn, replace(invocation, call=call, _arguments=edited), call_next)
    if isinstance(reply, ToolResult):
        note = f"[A person approved this call with edited arguments: {text}]\n"
        return replace(reply, output=note + reply.output)
    return reply


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
