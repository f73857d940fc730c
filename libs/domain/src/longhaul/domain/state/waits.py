"""What a trace waits on, as folds of their own: the wait itself, the tool calls waiting for a
person's decision, the calls handed to the client, and the inbox.

``TraceState`` owns the status (a wait sets it to ``waiting``, the end of one to ``running``)
and hands each event to the part it concerns, as it does with the goal tree; each part keeps
its own rules (``check_*``) beside its state, so a rule about approvals is read in one place.
"""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.events import WaitReason
from longhaul.domain.state.errors import InvalidTransition

WAKEABLE_WAITS: frozenset[str] = frozenset({"human", "subtraces"})
"""Waits a message with ``wake: true`` breaks (the others wait on a decision or a verdict)."""


class Wait(msgspec.Struct, kw_only=True):
    """The current wait, if any, and what answers it."""

    reason: WaitReason | None = None
    detail: str = ""
    tool_call_id: str | None = None
    """The call the wait answers (``ask_human``'s), until its tool result is appended."""
    human_reply: str | None = None
    interrupted: WaitReason | None = None
    """A message with ``wake`` broke this wait: the next turn answers the waiting call."""
    since: float = 0.0
    """When the wait began (its ``waiting`` event's time): the inbox is oldest first."""
    deadline: float | None = None
    on_deadline: ev.DeadlineAction | None = None

    def begin(
        self,
        reason: WaitReason,
        detail: str,
        tool_call_id: str | None = None,
        *,
        since: float = 0.0,
    ) -> None:
        self.reason, self.detail, self.tool_call_id = reason, detail, tool_call_id
        self.since, self.deadline, self.on_deadline = since, None, None

    def begin_timed(self, event: ev.Waiting) -> None:
        """A ``waiting`` event's wait, with its deadline."""
        self.begin(event.reason, event.detail, event.tool_call_id, since=event.ts)
        self.deadline, self.on_deadline = event.deadline, event.on_deadline

    def end(self) -> None:
        self.reason, self.detail = None, ""
        self.deadline, self.on_deadline = None, None

    def on_tool_result(self, tool_call_id: str | None) -> None:
        if tool_call_id == self.tool_call_id:
            self.human_reply = None
            self.tool_call_id = None
        self.interrupted = None


class Approvals(msgspec.Struct, kw_only=True):
    """Tool calls deferred for a person's decision (``wait_reason == "approval"``)."""

    pending: list[str] = msgspec.field(default_factory=list)
    decisions: dict[str, ev.ToolDecided] = msgspec.field(default_factory=dict)
    edited: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    """Arguments a person approved a call with: what it runs with from then on, a run again
    after a crash included (a later decision without arguments does not undo them)."""

    def check(self, trace_id: str, event: ev.ToolDecided) -> None:
        if event.tool_call_id not in self.pending:
            waiting = ", ".join(self.pending) or "none"
            raise InvalidTransition(
                f"tool call {event.tool_call_id} of trace {trace_id} does not wait for "
                f"approval (waiting: {waiting})",
                code="conflict",
            )
        if event.arguments is not None and not event.approved:
            raise InvalidTransition(
                "edited arguments come with approved true (they are what runs)", code="conflict"
            )

    def decide(self, event: ev.ToolDecided) -> bool:
        """Record one decision; True once every pending call has one."""
        self.decisions[event.tool_call_id] = event
        if event.arguments is not None:
            self.edited[event.tool_call_id] = event.arguments
        self.pending.remove(event.tool_call_id)
        return not self.pending


class ClientCalls(msgspec.Struct, kw_only=True):
    """Tool calls handed to the client, still without a result (``client_tools``)."""

    pending: list[str] = msgspec.field(default_factory=list)
    results: dict[str, ev.ClientToolResult] = msgspec.field(default_factory=dict)

    def check(self, trace_id: str, event: ev.ToolResultsPosted) -> None:
        ids = [result.tool_call_id for result in event.results]
        unknown = [i for i in ids if i not in self.pending]
        if unknown or len(set(ids)) != len(ids) or not ids:
            waiting = ", ".join(self.pending) or "none"
            raise InvalidTransition(
                f"results for {', '.join(unknown) or 'repeated or no calls'} do not match the "
                f"calls trace {trace_id} waits for ({waiting})",
                code="conflict",
            )

    def post(self, event: ev.ToolResultsPosted) -> bool:
        """Record the results; True once no call is left."""
        for result in event.results:
            self.results[result.tool_call_id] = result
            self.pending.remove(result.tool_call_id)
        return not self.pending


class Inbox(msgspec.Struct, kw_only=True):
    """Messages received (``message_received``; and a sub-trace's end once the call that
    spawned it was answered early), oldest first, and which ones were read."""

    messages: list[ev.MessageReceived] = msgspec.field(default_factory=list)
    read: dict[str, int] = msgspec.field(default_factory=dict)
    """``message_id`` → the sequence at which ``check_messages`` showed it."""

    def unread(self) -> list[ev.MessageReceived]:
        return [m for m in self.messages if m.message_id not in self.read]

    def check_received(self, trace_id: str, messaging: bool, event: ev.MessageReceived) -> None:
        if not messaging:
            raise InvalidTransition(
                f"trace {trace_id} has no inbox (create it with messaging: true)",
                code="messaging_off",
            )
        if not event.message_id or any(m.message_id == event.message_id for m in self.messages):
            raise InvalidTransition(
                f"message {event.message_id!r} is missing or already in the inbox",
                code="duplicate_message",
            )

    def check_read(self, event: ev.MessagesRead) -> None:
        known = {m.message_id for m in self.messages}
        unknown = [i for i in event.message_ids if i not in known]
        if unknown:
            raise InvalidTransition(f"unknown inbox messages {unknown}", code="not_found")

    def mark_read(self, event: ev.MessagesRead) -> None:
        for message_id in event.message_ids:
            self.read[message_id] = event.at_sequence

    def forget_reads_off(self, path: set[int]) -> None:
        """After a rewind: a message read on the abandoned branch is unread again."""
        self.read = {i: at for i, at in self.read.items() if at in path}
