"""ContextInjection (before_model): every ``context_injection_every`` model steps, remind the
model of its goal tree, the sub-traces still working for it, whom it can message (a trace
with an inbox: its parent and sub-agents), and whatever registered context hooks report.

The reminder is persisted as a synthetic user message (``name="context"``) so it stays in the
history the model reasons over and survives a crash; it is skipped while the head still has
unanswered tool calls, since a user message there would split a tool group.
"""

from __future__ import annotations

from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Turn
from longhaul.domain.state import TraceState
from longhaul.domain.state.collaborators import collaborators
from longhaul.llm.types import ModelRequest

MARKER = "context"


def _collaborators(state: TraceState) -> str:
    running = state.running_subtraces()
    if not running:
        return ""
    lines = [f"- {info.display_id} ({info.mode}): {info.task[:200]}" for info in running]
    return "Sub-agents still working for you:\n" + "\n".join(lines)


def _reachable(state: TraceState) -> str:
    """For a trace with an inbox: who ``send_message`` reaches (siblings are in the parent's
    log, which this pure middleware does not read: ``send_message`` names them if asked)."""
    if not state.config.messaging:
        return ""
    names = ["parent"] if state.parent_trace_id else []
    names += [c.name for c in collaborators(state) if c.type == "agent" and c.status == "running"]
    return f"You can message (send_message): {', '.join(names)}" if names else ""


class ContextInjection(Middleware):
    async def before_model(self, turn: Turn, request: ModelRequest) -> None:
        every = turn.config.context_injection_every
        steps = turn.history.assistant_count
        state = turn.state
        if every <= 0 or steps == 0 or steps % every:
            return
        head = state.messages.get(state.head_sequence)
        if head is not None and head.synthetic and head.name == MARKER:
            return
        if state.unanswered_tool_calls():
            return
        sections = [f"Goals:\n{state.goals.render()}", _collaborators(state), _reachable(state)]
        hooks = await turn.env.context_hooks.render(state)
        sections += [f"{name}:\n{text}" for name, text in hooks]
        body = "\n\n".join(section for section in sections if section)
        batch = turn.batch()
        batch.message(
            "user", content=f"[Context after {steps} steps]\n{body}", name=MARKER, synthetic=True
        )
        await turn.emit(batch)
        request.messages = turn.history.extended(request.messages, 1)
