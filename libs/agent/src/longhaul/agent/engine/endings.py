"""How a turn ends: a stop, a final answer (completed or sent to verification), a failure."""

from __future__ import annotations

import msgspec
from longhaul.agent.contract import TurnEnd, TurnOutcome
from longhaul.agent.engine.answer import is_cut, is_filtered, whole_answer
from longhaul.agent.engine.capture import capture, wants_capture
from longhaul.agent.engine.output import INVALID_OUTPUT, ask_for_repair, output_problems
from longhaul.agent.messages import tool_message, unfinished
from longhaul.agent.stop_reasons import BUDGET_REASONS
from longhaul.agent.turn import Turn
from longhaul.domain.events import (
    Completed,
    Failed,
    Stopped,
    VerificationRequested,
    Waiting,
)
from longhaul.domain.state import Message


def is_final_answer(message: Message | None) -> bool:
    """An assistant message without tool calls on the main path, finished by the model (not
    cut at the length limit, not filtered): the agent's answer."""
    return (
        message is not None
        and message.role == "assistant"
        and not message.tool_calls
        and message.branch_type == "main"
        and not is_cut(message)
        and not is_filtered(message)
    )


async def stop(turn: Turn, reason: str, *, end: TurnEnd = "stopped") -> TurnOutcome:
    """``Stopped(reason)``; calls of the last model turn that never ran are answered first so
    the conversation stays well-formed for whoever continues it."""
    state = turn.state
    batch = turn.batch()
    if state.status == "running":
        for call in state.unanswered_tool_calls():
            why = f"Not finished: the trace stopped ({reason})"
            tool_message(batch, call, unfinished(state, call, "not_run", why), synthetic=True)
    used = msgspec.structs.replace(state.run_usage) if reason in BUDGET_REASONS else None
    batch.add(Stopped(reason=reason, used=used))
    await turn.emit(batch)
    return TurnOutcome(end=end, steps=turn.steps, stop_reason=reason)


async def ask_budget(turn: Turn, detail: str) -> TurnOutcome:
    """A limit is reached: the run waits (``budget``) for a raise or a stop, the model not
    called (``longhaul.domain.spend``)."""
    await turn.emit([Waiting(reason="budget", detail=detail)])
    return TurnOutcome(end="waiting", steps=turn.steps)


async def fail(turn: Turn, error: str, reason: str, log: str = "") -> TurnOutcome:
    await turn.emit([Failed(error=error, stop_reason=reason, log=log)])
    return TurnOutcome(end="failed", steps=turn.steps, stop_reason=reason)


async def finish(turn: Turn, answer: Message) -> TurnOutcome | None:
    """The final answer completes the trace, or goes to the verifier when one is configured
    (the turn then waits; the verdict wakes the trace, see ``settle``). An answer that does
    not match the trace's ``output_schema`` is sent back to the model (None: the loop goes
    on), or fails the run once the repairs are used up (``engine.output``)."""
    state = turn.state
    text = whole_answer(state, answer)
    output_schema = turn.settings.output_schema
    if output_schema is not None:
        problems = output_problems(text, output_schema.schema)
        if problems:
            if await ask_for_repair(turn, answer, problems):
                return None
            error = "the answer does not match the output schema: " + "; ".join(problems)
            return await fail(turn, error, INVALID_OUTPUT)
    verification = turn.settings.verification
    if verification is not None:
        await turn.emit(
            [
                VerificationRequested(
                    attempt=state.verification.attempts + 1,
                    answer_sequence=answer.sequence,
                    answer=text,
                    method=verification,
                )
            ]
        )
        return TurnOutcome(end="waiting", steps=turn.steps)
    return await complete(turn, text)


async def complete(turn: Turn, summary: str) -> TurnOutcome:
    if wants_capture(turn):
        await capture(turn)
    totals = msgspec.structs.replace(turn.state.totals)
    await turn.emit([Completed(summary=summary, totals=totals)])
    return TurnOutcome(end="completed", steps=turn.steps)
