"""What a turn does first with what arrived while the trace waited.

- a human reply → the ``ask_human`` call's tool result;
- a message that woke the trace (``wake: true``) → the waiting ``ask_human`` or
  ``agent``/``evaluate`` call is answered now (no reply yet; the sub-agents still run and their
  results arrive in the inbox), so the model can read the message;
- sub-traces of unanswered ``agent``/``evaluate`` calls → once all of a call's children are
  finished, one tool result with their summaries; if any still runs, ``Waiting(subtraces)``
  again (the engine never runs a child);
- a verification verdict → passed: ``Completed``; failed: the errors and log as a user
  message and the loop goes on, at most ``max_reinjections`` times, then ``Failed`` with the
  verifier's log.
"""

from __future__ import annotations

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.engine.endings import complete, fail, is_final_answer
from longhaul.agent.messages import tool_message
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.turn import Turn
from longhaul.domain.events import VerificationFailed, Waiting
from longhaul.domain.messages import content_text
from longhaul.domain.state import SubtraceInfo

LOG_LIMIT = 8_000


async def take_arrivals(turn: Turn) -> TurnOutcome | None:
    """Answer what arrived while the trace waited; an outcome when the turn ends here."""
    await _human_reply(turn)
    await _interrupted(turn)
    outcome = await _subtraces(turn)
    if outcome is None:
        outcome = await _verification(turn)
    return outcome


async def _human_reply(turn: Turn) -> None:
    state = turn.state
    call_id = state.wait_tool_call_id
    if state.human_reply is None or call_id is None:
        return
    pending = {call.id: call for call in state.unanswered_tool_calls()}
    if call_id not in pending:
        return
    batch = turn.batch()
    tool_message(batch, pending[call_id], ToolResult(output=state.human_reply))
    await turn.emit(batch)


async def _interrupted(turn: Turn) -> None:
    state = turn.state
    if state.interrupted_wait is None:
        return
    unread = len(state.unread_messages())
    news = f"{unread} new message(s) in your inbox: read them with check_messages."
    running: dict[str, list[str]] = {}
    for info in state.running_subtraces():
        running.setdefault(info.tool_call_id, []).append(info.display_id)
    batch = turn.batch()
    for call in state.unanswered_tool_calls():
        if state.interrupted_wait == "human" and call.id == state.wait_tool_call_id:
            text = f"No reply yet. {news} Ask again if you still need an answer."
        elif state.interrupted_wait == "subtraces" and call.id in running:
            ids = ", ".join(running[call.id])
            text = (
                f"Sub-agent(s) {ids} still running. {news} Each sub-agent's result will arrive "
                "in your inbox when it finishes."
            )
        else:
            continue
        tool_message(batch, call, ToolResult(output=text))
    await turn.emit(batch)


def _report(children: list[SubtraceInfo]) -> ToolResult:
    blocks = [
        f"Sub-agent {info.display_id} ({info.mode}, {info.status}):\n"
        f"{info.summary or '(no summary)'}"
        for info in children
    ]
    failed = all(info.status != "completed" for info in children)
    return ToolResult(output="\n\n".join(blocks), error_code="subtrace_failed" if failed else None)


async def _subtraces(turn: Turn) -> TurnOutcome | None:
    state = turn.state
    pending = state.unanswered_tool_calls()
    if not pending or not state.subtraces:
        return None
    by_call: dict[str, list[SubtraceInfo]] = {}
    for info in state.subtraces.values():
        by_call.setdefault(info.tool_call_id, []).append(info)
    batch = turn.batch()
    running: list[str] = []
    for call in pending:
        children = by_call.get(call.id)
        if not children:
            continue
        still = [info.child_trace_id for info in children if info.status == "running"]
        if still:
            running.extend(still)
        else:
            tool_message(batch, call, _report(children))
    await turn.emit(batch)
    if not running:
        return None
    await turn.emit([Waiting(reason="subtraces", detail=", ".join(running))])
    return TurnOutcome(end="waiting", steps=turn.steps)


def _feedback(failure: VerificationFailed) -> str:
    errors = "\n".join(f"- {error}" for error in failure.errors) or "- (no details)"
    text = f"Your answer did not pass verification (attempt {failure.attempt}).\nErrors:\n{errors}"
    if failure.log:
        text += f"\n\nVerifier log:\n{failure.log[-LOG_LIMIT:]}"
    return text + "\n\nFix the problems, then give your final answer again."


async def _verification(turn: Turn) -> TurnOutcome | None:
    state = turn.state
    verification = state.verification
    head = state.messages.get(state.head_sequence)
    if verification.passed and is_final_answer(head):
        assert head is not None
        return await complete(turn, content_text(head.content))
    if not verification.unconsumed_failure or not verification.failures:
        return None
    last = verification.failures[-1]
    if len(verification.failures) > turn.config.verification.max_reinjections:
        errors = "; ".join(last.errors) or "no details"
        return await fail(
            turn,
            f"verification failed after {len(verification.failures)} attempt(s): {errors}",
            "verification_failed",
            log=last.log,
        )
    batch = turn.batch()
    batch.message("user", content=_feedback(last), synthetic=True)
    await turn.emit(batch)
    return None
