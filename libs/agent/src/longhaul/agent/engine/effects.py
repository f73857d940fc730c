"""The effect ledger's side of a call: effects on the log before they happen, and calls cut off
by a crash resumed without doing anything twice.

Before a call with effects (``idempotent`` or ``unsafe``) acts, ``EffectStarted`` is appended
and settled: if the append fails the call does not run and the turn ends. Its result settles
it. A call found started but unanswered when a turn resumes has an **unknown outcome**; how it
is settled (:func:`settlement`, a pure rule) follows the operator's ``tools.on_unknown`` for
the tool, else the tool's own ``on_unknown``, else its effects:

- ``rerun`` (the default of an ``idempotent`` tool): run again with the same idempotency key;
- ``model`` (``bash``, ``write``, ``edit``: their effects stay in the trace's sandbox): the
  model is told what is known — the tool's ``settle`` hook compares a file with what the call
  meant to write; a command is cut off, outcome unknown, inspect before repeating;
- a tool with a ``reconcile`` hook: asked; its result stands as the answer, or, not done,
  the call runs once more with the same key;
- ``ask`` (any other ``unsafe`` tool: effects outside the sandbox): it waits for a person (an
  ``approval`` wait): run again, mark done, or tell the model it failed (``ToolApproval``
  answers the last two).

Every resumption is recorded (``EffectResumed``), so the viewer shows what happened and a
call cut off again is dealt with again. The model sees one result per call.
"""

from __future__ import annotations

import logging
from typing import Literal

from longhaul.agent.contract import EffectNotRecorded, StaleState
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.tools.base import Tool
from longhaul.agent.tools.result import CUT_OFF, Deferred, ToolReply, ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.config import OnUnknown
from longhaul.domain.events import EffectResumed, EffectStarted
from longhaul.domain.state.effects import Effect

log = logging.getLogger(__name__)

RunAgain = Literal["rerun", "reconciled_not_done", "run_again"]
Settlement = Literal["run_again", "rerun", "model", "reconcile", "ask"]

LEDGER_EXEMPT = frozenset({"agent", "evaluate"})
"""Tools with their own once-only machinery: the sub-trace a call starts is named after it."""

OUTCOME_UNKNOWN = "outcome unknown"
"""How an approval wait's detail begins when a person must say what a cut-off call did."""


async def act(turn: Turn, tool: Tool, invocation: ToolInvocation) -> ToolReply:
    """Run the call, through the ledger when it has effects."""
    effect = turn.state.ledger.get(invocation.call.id)
    if effect is not None:
        return await _resume(turn, tool, invocation, effect)
    if tool.effect != "none" and tool.name not in LEDGER_EXEMPT:
        await _emit(turn, tool, _started(tool, invocation))
    return await tool.run(invocation.ctx, invocation.arguments())


def _started(tool: Tool, invocation: ToolInvocation) -> EffectStarted:
    assert tool.effect != "none"
    return EffectStarted(
        tool_call_id=invocation.call.id,
        tool=tool.name,
        idempotency_key=invocation.ctx.idempotency_key,
        effects=tool.effect,
    )


def settlement(effect: Effect, tool: Tool, override: OnUnknown | None = None) -> Settlement:
    """How a call cut off by a crash is settled: a person's decision first (run it again);
    then the operator's ``override`` (``tools.on_unknown``), the tool's own ``on_unknown``, a
    rerun for an idempotent call, its ``reconcile`` hook; a person otherwise."""
    if effect.decision is not None:  # a person said run it again (ToolApproval let it through)
        return "run_again"
    chosen = override or tool.on_unknown
    if chosen is not None:
        return chosen
    if effect.started.effects == "idempotent":
        return "rerun"
    return "reconcile" if tool.reconcile is not None else "ask"


async def _resume(turn: Turn, tool: Tool, invocation: ToolInvocation, effect: Effect) -> ToolReply:
    call_id = invocation.call.id
    override = turn.env.tool_settings.on_unknown.get(tool.name)
    how = settlement(effect, tool, override)
    if how == "run_again" or how == "rerun":
        return await _run_again(turn, tool, invocation, how)
    if how == "model":
        return await _tell_model(turn, tool, invocation)
    if how == "ask":
        why = (
            "the operator asks"
            if override
            else "the tool asks"
            if tool.on_unknown
            else "no reconcile hook"
        )
        return await _ask(turn, tool, call_id, why)
    assert tool.reconcile is not None
    try:
        answer = await tool.reconcile(invocation.ctx)
    except Exception as exc:  # a broken hook must not decide: a person does
        log.warning("reconcile of %s (%s) failed: %s", tool.name, call_id, exc)
        return await _ask(turn, tool, call_id, f"reconcile failed: {exc}")
    if answer is None:
        return await _run_again(turn, tool, invocation, "reconciled_not_done")
    await _emit(turn, tool, EffectResumed(tool_call_id=call_id, resolution="reconciled_done"))
    return answer if isinstance(answer, ToolResult) else ToolResult(output=answer)


def cut_off_result(tool_name: str) -> ToolResult:
    """What the model is told of a call cut off by a crash when nothing can be looked at: no
    partial output is kept (a tool's output reaches the log only with its result)."""
    return ToolResult(
        output=f"this {tool_name} call was cut off: the worker running it died before it "
        "finished. Its outcome is unknown (it may have run partly, fully or not at all) and none "
        "of its output was kept. Inspect the state it would change before running it again.",
        title=f"{tool_name} cut off",
        error_code=CUT_OFF,
    )


async def _tell_model(turn: Turn, tool: Tool, invocation: ToolInvocation) -> ToolResult:
    """Settle the call by telling the model what is known of it (``on_unknown: model``)."""
    result = cut_off_result(tool.name)
    if tool.settle is not None:
        try:
            result = await tool.settle(invocation.ctx, invocation.arguments())
        except Exception as exc:  # nothing to compare with: the model is told it is unknown
            log.warning("settle of %s (%s) failed: %s", tool.name, invocation.call.id, exc)
    event = EffectResumed(
        tool_call_id=invocation.call.id, resolution="told_model", detail=result.output[:300]
    )
    await _emit(turn, tool, event)
    return result


async def _run_again(
    turn: Turn, tool: Tool, invocation: ToolInvocation, resolution: RunAgain
) -> ToolReply:
    await _emit(turn, tool, EffectResumed(tool_call_id=invocation.call.id, resolution=resolution))
    return await tool.run(invocation.ctx, invocation.arguments())


async def _ask(turn: Turn, tool: Tool, call_id: str, why: str) -> Deferred:
    await _emit(turn, tool, EffectResumed(tool_call_id=call_id, resolution="asked", detail=why))
    return Deferred(
        "approval",
        detail=f"{OUTCOME_UNKNOWN}: {tool.name} call {call_id} was cut off by a crash ({why}); "
        "run it again, mark it done, or tell the model it failed",
    )


async def _emit(turn: Turn, tool: Tool, event: EffectStarted | EffectResumed) -> None:
    """A plain emit is a durable append: the record is in the log before the call acts."""
    try:
        await turn.emit([event])
    except StaleState:
        raise
    except Exception as exc:
        raise EffectNotRecorded(f"{tool.name} not run: its effect was not recorded: {exc}") from exc
