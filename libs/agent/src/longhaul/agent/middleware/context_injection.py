"""ContextInjection (before_model): every ``context_injection_every`` model steps, remind the
model of its goal tree, every collaborator (``name [type, status]: summary``: its parent,
sub-agents running, finished with their summaries or failed, remote ones by their
``agent://`` id, siblings, persons being waited on), whom it can message (a trace with an
inbox), and whatever registered context hooks report. The executor's messenger reads the
collaborators from their logs; without one the trace's own log gives its sub-agents and a
person it waits on.

The reminder is persisted as a synthetic user message (``name="context"``) so it stays in the
history the model reasons over and survives a crash; it is skipped while the head still has
unanswered tool calls, since a user message there would split a tool group.
"""

from __future__ import annotations

from longhaul.agent.middleware.base import Middleware
from longhaul.agent.turn import Turn
from longhaul.domain.state.collaborators import Collaborator, collaborators
from longhaul.llm.types import ModelRequest

MARKER = "context"


def render_collaborators(found: list[Collaborator]) -> str:
    if not found:
        return ""
    lines = []
    for item in found:
        summary = " ".join(item.summary.split())
        lines.append(f"- {item.name} [{item.type}, {item.status}]: {summary or '(no summary)'}")
    return "Collaborators:\n" + "\n".join(lines)


def _reachable(turn: Turn, found: list[Collaborator]) -> str:
    """For a trace with an inbox: who ``send_message`` reaches (the agents still at work)."""
    state = turn.state
    if not turn.settings.messaging:
        return ""
    names = [c.name for c in found if c.type == "agent" and c.status in ("running", "waiting")]
    if state.parent_trace_id and "parent" not in names:
        names.insert(0, "parent")
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
        messenger = turn.env.messenger
        found = await messenger.collaborators(state) if messenger else collaborators(state)
        sections = [
            f"Goals:\n{state.goals.render()}",
            render_collaborators(found),
            _reachable(turn, found),
        ]
        hooks = await turn.env.context_hooks.render(state)
        sections += [f"{name}:\n{text}" for name, text in hooks]
        body = "\n\n".join(section for section in sections if section)
        batch = turn.batch()
        batch.message(
            "user", content=f"[Context after {steps} steps]\n{body}", name=MARKER, synthetic=True
        )
        await turn.emit(batch)
        request.messages = turn.history.extended(request.messages, 1)
