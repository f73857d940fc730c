"""Running the tool calls of one model turn, in order, each result emitted before the next.

A call either answers now (its recorded events and its tool message go out as one batch) or
is :class:`Deferred`: its events go out, its result comes in a later turn. Several deferrals
of the same kind (sub-traces) join one wait; a deferral that would need a second, different
wait (or a second question to the human) is refused with ``deferred_conflict`` so the model
issues it again later. After the last call, a pending deferral becomes ``Waiting``. Each call,
its recording included (so a spawned child's ``subtrace_spawned`` carries it), is an
``execute_tool`` span.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from longhaul.agent.contract import LiveUpdate, TurnOutcome
from longhaul.agent.engine.attachments import show_images, store_attachments
from longhaul.agent.engine.effects import act
from longhaul.agent.engine.endings import stop
from longhaul.agent.errors import ToolError
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import failure, tool_message
from longhaul.agent.middleware.base import ToolHandler
from longhaul.agent.stop_reasons import STOP_REQUESTED
from longhaul.agent.telemetry import record_reply, tool_span
from longhaul.agent.tools.result import Deferred, ToolReply, ToolResult
from longhaul.agent.turn import Step, Turn
from longhaul.domain.events import Waiting
from longhaul.llm.types import ToolCall
from opentelemetry.trace import Span


def innermost(turn: Turn) -> ToolHandler:
    """The call itself, under every ``wrap_tool_call``."""

    async def execute(invocation: ToolInvocation) -> ToolReply:
        if invocation.tool is None:
            available = ", ".join(turn.tools.names()) or "none"
            raise ToolError(
                f"unknown tool {invocation.name!r}; available: {available}", code="unknown_tool"
            )
        if not invocation.tool.read_only:
            await turn.settle()  # what came before is in the log before this call acts
        return await act(turn, invocation.tool, invocation)

    return execute


class _Wait:
    def __init__(self, first: Deferred, call_id: str) -> None:
        self.reason = first.reason
        self.details = [first.detail]
        self.tool_call_id = call_id if first.reason == "human" else None
        self.calls = [call_id]
        self.deadline: Deferred | None = None
        self._time(first)

    def joins(self, other: Deferred) -> bool:
        return other.reason == self.reason and other.reason != "human"

    def add(self, other: Deferred, call_id: str) -> None:
        self.details.append(other.detail)
        self.calls.append(call_id)
        self._time(other)

    def _time(self, deferred: Deferred) -> None:
        """The earliest deadline of the joined deferrals decides."""
        if deferred.deadline_s is None:
            return
        if self.deadline is None or deferred.deadline_s < (self.deadline.deadline_s or 0):
            self.deadline = deferred

    def event(self) -> Waiting:
        timed = self.deadline
        return Waiting(
            reason=self.reason,
            detail=", ".join(self.details),
            tool_call_id=self.tool_call_id,
            pending_calls=self.calls if self.reason in ("approval", "client_tools") else [],
            deadline=None if timed is None else time.time() + (timed.deadline_s or 0),
            on_deadline=None if timed is None else timed.on_deadline,
        )


async def run_tool_calls(turn: Turn, step: Step, handler: ToolHandler) -> TurnOutcome | None:
    return await run_calls(turn, step.calls, handler, step.answered)


async def run_calls(
    turn: Turn,
    calls: Sequence[ToolCall],
    handler: ToolHandler,
    answered: Mapping[str, ToolResult] | None = None,
) -> TurnOutcome | None:
    """Run ``calls`` in order (``answered`` ones get their preset answer); a ``Waiting`` outcome
    when any was deferred."""
    wait: _Wait | None = None
    shown: list[dict[str, Any]] = []
    for call in calls:
        if turn.state.stop_requested:
            return await stop(turn, STOP_REQUESTED)
        preset = (answered or {}).get(call.id)
        if preset is not None:
            batch = turn.batch()
            tool_message(batch, call, preset, synthetic=True)
            await turn.emit(batch)
            continue
        with tool_span(turn.trace_id, call) as span:
            wait = await _run_one(turn, call, handler, wait, span, shown)
    if wait is None:
        await show_images(turn, shown)
        return None
    await turn.emit([wait.event()])
    return TurnOutcome(end="waiting", steps=turn.steps)


async def _run_one(
    turn: Turn,
    call: ToolCall,
    handler: ToolHandler,
    wait: _Wait | None,
    span: Span,
    shown: list[dict[str, Any]],
) -> _Wait | None:
    """Run one call and record its answer, or defer it; returns the turn's wait (joined by
    this call if it was deferred)."""
    invocation = ToolInvocation(
        call, turn.tools.get(call.name), turn.tool_context(call.id, call.name)
    )
    await turn.notify(LiveUpdate(kind="tool_start", tool=call.name, tool_call_id=call.id))
    reply = await handler(invocation)
    if isinstance(reply, Deferred):
        if wait is None or wait.joins(reply):
            record_reply(span, reply)
            await turn.emit(invocation.ctx.recorded)
            if wait is None:
                wait = _Wait(reply, call.id)
            else:
                wait.add(reply, call.id)
            await turn.notify(
                LiveUpdate(
                    kind="tool_end",
                    tool=call.name,
                    tool_call_id=call.id,
                    text=f"waiting: {reply.reason}",
                )
            )
            return wait
        reply = failure(
            "deferred_conflict",
            f"not started: this turn already waits for {wait.reason}; call {call.name} "
            "again once that is answered",
        )
        invocation.ctx.recorded.clear()
    record_reply(span, reply)
    await _answer(turn, invocation, reply, shown)
    return wait


async def _answer(
    turn: Turn, invocation: ToolInvocation, reply: ToolResult, shown: list[dict[str, Any]]
) -> None:
    call = invocation.call
    batch = turn.batch()
    for event in invocation.ctx.recorded:
        batch.add(event)
    extra = await store_attachments(turn, call.id, reply, shown)
    message = tool_message(batch, call, reply, extra=extra)
    # Write-behind: the next model request is built while this result's append is in flight.
    await turn.emit(batch, behind=True)
    await turn.notify(
        LiveUpdate(
            kind="tool_end",
            tool=call.name,
            tool_call_id=call.id,
            text=reply.title,
            sequence=message.sequence,
        )
    )
