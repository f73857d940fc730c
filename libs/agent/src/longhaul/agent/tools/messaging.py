"""``check_messages`` and ``send_message``: a trace's inbox, for traces created with
``messaging: true`` (and their sub-traces).

Reading is an event (``messages_read``, recorded with the result), so a replay shows the same
messages as read and a rewind before the call makes them unread again. Sending goes through
the executor's :class:`~longhaul.agent.contract.Messenger` (this library never touches the log
of another trace); the message id is derived from the call's idempotency key, so a call re-run
after a crash does not deliver twice.
"""

from __future__ import annotations

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.domain.events import MessagesRead
from longhaul.domain.state import TraceState

MESSAGING_TOOLS = ["check_messages", "send_message"]


def inbox_note(state: TraceState) -> str | None:
    """The volatile "Messages" section while unread messages wait (``None`` otherwise)."""
    unread = state.unread_messages()
    if not unread:
        return None
    return (
        f"Messages: {len(unread)} unread (latest from {unread[-1].sender}); "
        "read them with check_messages."
    )


@tool(read_only=True)
async def check_messages(ctx: ToolContext) -> str:
    """Read the new messages in your inbox (sent by the user, other agents, or your
    sub-agents); they are marked read."""
    unread = ctx.state.unread_messages()
    if not unread:
        return "No new messages."
    ctx.record(
        MessagesRead(
            message_ids=[m.message_id for m in unread], at_sequence=ctx.state.head_sequence
        )
    )
    blocks = []
    for m in unread:
        head = f"From {m.sender}"
        if m.sender_trace_id and m.sender_trace_id not in m.sender:
            head += f" (trace {m.sender_trace_id})"
        if m.conversation_id:
            head += f", conversation {m.conversation_id}"
        blocks.append(f"{head}:\n{m.content}")
    return "\n\n".join(blocks)


@tool(effects="idempotent")  # the message id is the call's idempotency key
async def send_message(ctx: ToolContext, to: str, content: str, wake: bool = False) -> str:
    """Send a message to an agent you work with: ``parent``, or the trace id of one of your
    sub-agents (``agent://…`` for one on another longhaul) or of a sibling sub-agent. It
    lands in their inbox.

    Args:
        to: ``parent`` or a collaborator's trace id.
        content: the message, self-contained.
        wake: also wake the recipient if it is waiting on a person or on its sub-agents.
    """
    if ctx.messenger is None:
        raise ToolError("messaging is not available in this deployment", code="unavailable")
    delivered = await ctx.messenger.send(
        ctx.state, to, content, f"m:{ctx.idempotency_key}", wake=wake
    )
    return f"Delivered to {delivered}."
