"""The message tree, a fold of its own: every message of a trace by sequence, the head, and
the main path (head back to root) kept incrementally, so appending to the head is O(1) and
building a request does not re-walk the history.

A message of the tree is the event that recorded it (client input is folded into one). A
rewind moves the head to an earlier message; what follows it stays in the tree, off the path.
"""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state.errors import InvalidTransition

Message = ev.MessageAppended


class MessageTree(msgspec.Struct, kw_only=True):
    messages: dict[int, Message] = msgspec.field(default_factory=dict)
    head_sequence: int = 0
    last_sequence: int = 0
    path: list[int] = msgspec.field(default_factory=list)
    image_messages: int = 0
    """Messages whose content carries an ``image_url`` part: a request is searched for image
    references only when there are some (a search per model call would grow with history)."""

    # queries ---------------------------------------------------------------------------------

    def main_path(self) -> list[Message]:
        return [self.messages[seq] for seq in self.path]

    def all_messages(self) -> list[Message]:
        return [self.messages[seq] for seq in sorted(self.messages)]

    def path_to(self, sequence: int) -> list[int]:
        """Sequences from the root to ``sequence`` inclusive."""
        chain: list[int] = []
        current: int | None = sequence
        while current is not None:
            chain.append(current)
            current = self.messages[current].parent_sequence
        chain.reverse()
        return chain

    def unanswered_tool_calls(self, upto: int | None = None) -> list[ev.ToolCall]:
        """Calls of the last assistant ``tool_calls`` message on the path to ``upto`` (default
        head) that have no tool result after it on that path."""
        current = self.head_sequence if upto is None else upto
        answered: set[str] = set()
        while current:
            message = self.messages[current]
            if message.role == "tool":
                if message.tool_call_id:
                    answered.add(message.tool_call_id)
            elif message.role == "assistant" and message.tool_calls:
                return [call for call in message.tool_calls if call.id not in answered]
            else:
                return []
            current = message.parent_sequence or 0
        return []

    def safe_cut(self, trace_id: str, sequence: int) -> int:
        """The cut at ``sequence`` moved forward past the tool results its calls need."""
        if sequence not in self.messages:
            raise InvalidTransition(
                f"trace {trace_id} has no message {sequence}", code="unknown_sequence"
            )
        on_head_path = set(self.path)
        cut = sequence
        while pending := {call.id for call in self.unanswered_tool_calls(cut)}:
            candidates = [
                child
                for child in self._children(cut)
                if self.messages[child].role == "tool"
                and self.messages[child].tool_call_id in pending
            ]
            if not candidates:
                break
            preferred = [child for child in candidates if child in on_head_path]
            cut = (preferred or candidates)[-1]
        return cut

    def _children(self, sequence: int) -> list[int]:
        return [seq for seq, msg in self.messages.items() if msg.parent_sequence == sequence]

    # rules -----------------------------------------------------------------------------------

    def check_follows(self, sequence: int, parent: int | None) -> None:
        if sequence != self.last_sequence + 1:
            raise InvalidTransition(
                f"message sequence {sequence} does not follow {self.last_sequence}",
                code="sequence_gap",
            )
        if parent is not None and parent not in self.messages:
            raise InvalidTransition(f"unknown parent message {parent}", code="unknown_sequence")

    # changes ---------------------------------------------------------------------------------

    def insert(self, message: Message) -> None:
        """Put a checked message in the tree and move the head (messages aside do not)."""
        parent = message.parent_sequence
        self.messages[message.sequence] = message
        self.last_sequence = message.sequence
        if isinstance(message.content, list) and any(
            isinstance(part, dict) and part.get("type") == "image_url" for part in message.content
        ):
            self.image_messages += 1
        if message.aside:
            return
        if parent == (self.head_sequence or None):
            self.path.append(message.sequence)
        else:
            self.path = self.path_to(message.sequence)
        self.head_sequence = message.sequence

    def append_inputs(self, items: list[ev.InputMessage], ts: float, goal_id: str | None) -> None:
        """A request's input messages, each after the head."""
        for item in items:
            message = Message(
                id="",
                ts=ts,
                sequence=self.last_sequence + 1,
                parent_sequence=self.head_sequence or None,
                role=item.role,
                content=item.content,
                tool_calls=item.tool_calls,
                tool_call_id=item.tool_call_id,
                name=item.name,
                goal_id=goal_id,
            )
            self.check_follows(message.sequence, message.parent_sequence)
            self.insert(message)

    def rewind_to(self, cut: int) -> set[int]:
        """The head moves back to ``cut``; returns the sequences of the new path."""
        self.head_sequence = cut
        self.path = self.path_to(cut)
        return set(self.path)
