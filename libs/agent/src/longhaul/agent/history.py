"""``History``: the request's messages kept aligned with ``state.path``, incrementally.

A long trace has tens of thousands of messages; rebuilding dicts and re-estimating tokens for
all of them on every step would make a step O(history) in Python. The fold keeps the main path
as a list that grows by ``append`` and is replaced on a rewind or compaction, so this class
converts each new message once, keeps a running token total, and only starts over when the
path object changes. What remains per step is one C-level list copy.

One-time outputs (``include_output_only_once``) are sent in full until an assistant message
follows them on the path — i.e. in the request that first shows them — and as their
``long_term_memory`` from then on.
"""

from __future__ import annotations

from typing import Any

from longhaul.core.state import Message, TraceState
from longhaul.llm.estimate import estimate_tokens
from longhaul.llm.prompt import content_text
from longhaul.llm.types import ChatMessage

MESSAGE_OVERHEAD_TOKENS = 4
"""Role markers and separators every chat format adds per message."""


def message_tokens(message: ChatMessage) -> int:
    text = content_text(message.get("content"))
    for call in message.get("tool_calls") or ():
        function: dict[str, Any] = call.get("function", {})
        text += function.get("name", "") + str(function.get("arguments", ""))
    return estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def _remembered(message: Message) -> ChatMessage:
    out = message.to_openai()
    out["content"] = message.long_term_memory or "(output shown once; no longer available)"
    return out


class History:
    def __init__(self, state: TraceState) -> None:
        self.state = state
        self._path: list[int] | None = None
        self._seen = 0
        self._last = 0
        self._dicts: list[ChatMessage] = []
        self._tokens: list[int] = []
        self._once: list[int] = []
        self.total_tokens = 0
        self.assistant_count = 0
        self.last_assistant_index = -1

    def _reset(self) -> None:
        self._path = self.state.path
        self._seen = 0
        self._dicts, self._tokens, self._once = [], [], []
        self.total_tokens = 0
        self.assistant_count = 0
        self.last_assistant_index = -1

    def sync(self) -> None:
        path = self.state.path
        seen = self._seen
        if path is not self._path or len(path) < seen or (seen and path[seen - 1] != self._last):
            self._reset()
            seen = 0
        messages = self.state.messages
        for seq in path[seen:]:
            self._add(messages[seq])
        self._seen = len(path)
        self._last = path[-1] if path else 0

    def _add(self, message: Message) -> None:
        index = len(self._dicts)
        if message.role == "assistant":
            for earlier in self._once:
                self._set(earlier, _remembered(self.state.messages[self.state.path[earlier]]))
            self._once.clear()
            self.assistant_count += 1
            self.last_assistant_index = index
        as_dict = message.to_openai()
        self._dicts.append(as_dict)
        self._tokens.append(0)
        self._set(index, as_dict)
        if message.include_output_only_once:
            self._once.append(index)

    def _set(self, index: int, as_dict: ChatMessage) -> None:
        tokens = message_tokens(as_dict)
        self.total_tokens += tokens - self._tokens[index]
        self._tokens[index] = tokens
        self._dicts[index] = as_dict

    # ------------------------------------------------------------------ queries

    def messages(self) -> list[ChatMessage]:
        """A fresh list (middleware may append to it) of the cached dicts."""
        self.sync()
        return list(self._dicts)

    def complete_messages(self) -> list[ChatMessage]:
        """Like :meth:`messages` without a trailing tool group that still lacks results: the
        shape a side request (summary, reflection) can send as is."""
        self.sync()
        if self.state.unanswered_tool_calls():
            return self._dicts[: self.last_assistant_index]
        return list(self._dicts)

    def tail(self, count: int) -> list[ChatMessage]:
        """The last ``count`` messages (just appended ones, to extend a built request)."""
        self.sync()
        return self._dicts[len(self._dicts) - count :]

    def at(self, indices: list[int]) -> list[ChatMessage]:
        self.sync()
        return [self._dicts[i] for i in indices]

    def tokens(self) -> int:
        self.sync()
        return self.total_tokens

    def tokens_at(self, indices: list[int]) -> int:
        self.sync()
        return sum(self._tokens[i] for i in indices)
