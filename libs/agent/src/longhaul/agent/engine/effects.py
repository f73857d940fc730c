"""The effect ledger's side of a call: effects on the log before they happen, and calls cut off
by a crash resumed without doing anything twice.

Before a call with effects (``idempotent`` or ``unsafe``) acts, ``EffectStarted`` is appended
and settled: if the append fails the call does not run and the turn ends. Its result settles
it. A call found started but unanswered when a turn resumes has an **unknown outcome**:

- ``idempotent``: run again with the same idempotency key; the model is not asked;
- a tool with a ``reconcile`` hook: asked; its result stands as the answer, or, not done,
  the call runs once more with the same key;
- otherwise (``unsafe``): it waits for a person (an ``approval`` wait): run again, mark done,
  or tell the model it failed (``ToolApproval`` answers the last two).

Every resumption is recorded (``EffectResumed``), so the viewer shows what happened and a
call cut off again is dealt with again. The model sees one result per call.
"""

from __future__ import annotations

import logging
from typing import Literal

from longhaul.agent.contract import EffectNotRecorded, StaleState
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.tools.base import Tool
from longhaul.agent.tools.result import Deferred, ToolReply, ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.events import EffectResumed, EffectStarted
from longhaul.domain.state.effects import Effect

log = logging.getLogger(__name__)

RunAgain = Literal["rerun", "reconciled_not_done", "run_again"]

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


async def _resume(turn: Turn, tool: Tool, invocation: ToolInvocation, effect: Effect) -> ToolReply:
    call_id = invocation.call.id
    if effect.decision is not None:  # a person said run it again (ToolApproval let it through)
        return await _run_again(turn, tool, invocation, "run_again")
    if effect.started.effects == "idempotent":
        return await _run_again(turn, tool, invocation, "rerun")
    if tool.reconcile is not None:
        try:
            answer = await tool.reconcile(invocation.ctx)
        except Exception as exc:  # a broken hook must not decide: a person does
            log.warning("reconcile of %s (%s) failed: %s", tool.name, call_id, exc)
            return await _ask(turn, tool, call_id, f"reconcile failed: {exc}")
        if answer is None:
            return await _run_again(turn, tool, invocation, "reconciled_not_done")
        await _emit(turn, tool, EffectResumed(tool_call_id=call_id, resolution="reconciled_done"))
        return answer if isinstance(answer, ToolResult) else ToolResult(output=answer)
    return await _ask(turn, tool, call_id, "no reconcile hook")


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
