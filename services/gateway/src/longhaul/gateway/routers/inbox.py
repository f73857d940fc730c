"""Inbox: messages for a running trace (``POST /api/traces/{id}/inbox``) and the design's
agent-to-agent webhook form (``POST /webhook/a2a-messages``, target trace in the body).

Both need the trace owner's key and append one ``message_received`` event, checked by the fold:
an unknown trace (or another key's) is a 404, an ended one or one created without
``messaging`` a 409. ``wake: true`` also wakes a trace waiting on a person or on its
sub-traces; otherwise the message waits for the trace's next model call, which shows a
reminder until ``check_messages`` reads it.
"""

from __future__ import annotations

from fastapi import APIRouter
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.gateway import commands
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import InboxRequest, MessageAccepted, WebhookMessage

router = APIRouter(tags=["inbox"], responses=ERROR_RESPONSES)


async def _deliver(
    runtime: Runtime, principal: Principal, trace_id: str, body: InboxRequest
) -> MessageAccepted:
    message_id = new_id("msg")
    event = ev.MessageReceived(
        sender=body.sender,
        content=body.content,
        conversation_id=body.conversation_id,
        wake=body.wake,
        message_id=message_id,
    )
    state, recorded = await commands.append_to_trace(runtime, principal, trace_id, lambda _: event)
    return MessageAccepted(trace_id=state.trace_id, message_id=message_id, event_id=recorded.seq)


@router.post(
    "/api/traces/{trace_id}/inbox",
    status_code=202,
    summary="Leave a message in a running trace's inbox",
)
async def post_inbox(
    trace_id: str, body: InboxRequest, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> MessageAccepted:
    return await _deliver(runtime, principal, trace_id, body)


@router.post(
    "/webhook/a2a-messages",
    status_code=202,
    summary="Agent-to-agent message: the inbox request with the target trace in the body",
)
async def post_a2a_message(
    body: WebhookMessage, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> MessageAccepted:
    return await _deliver(runtime, principal, body.trace_id, body)
