"""``History``: the request's messages kept aligned with ``state.path``, incrementally.

A long trace has tens of thousands of messages; rebuilding dicts and re-estimating tokens for
all of them on every step would make a step O(history) in Python. The fold keeps the main path
as a list that grows by ``append`` and is replaced on a rewind or compaction, so this class
converts each new message once, keeps a running token total, and only starts over when the
path object changes.

Requests do not get a copy of that list either: a copy per step is O(history) too, and it was
all of a step's growth with history (bench/bench_engine.py: ~100 µs per step at 100 steps,
~185 µs at 10,000 with the copy, flat without it). They get a :class:`MessageView`, read-only, that
shares the list. That is safe because of one rule this class keeps: an entry of the list is
never rewritten once a view may show it, except a pending one-time output (below), and views
share the list only up to the first of those; a reset (rewind, compaction) starts a new list
rather than clearing the old one. So a view never changes after it is handed out, whoever
keeps it (a step, a recording model, a test), and building one costs O(pending one-time
outputs and what follows them): the last step's tool results at most. A middleware that
changes the messages replaces ``request.messages`` (a view cannot be mutated, so it cannot
write into the history by accident); :meth:`History.extended` does that in O(1) for the
common "append what I just emitted" case. The dicts themselves are shared, as they always
were: nobody may mutate them (providers build their own).

One-time outputs (``include_output_only_once``) are sent in full until an assistant message
follows them on the path — i.e. in the request that first shows them — and as their
``long_term_memory`` from then on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any, overload

from longhaul.domain.messages import content_text
from longhaul.domain.state import Message, TraceState
from longhaul.llm.estimate import estimate_tokens
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


class MessageView(Sequence[ChatMessage]):
    """Read-only messages of one request: the first ``frozen`` entries of ``shared`` (which
    its owner only appends to past them, see the module doc) followed by ``tail``.

    No ``append``, ``extend`` or item assignment: code that needs other messages builds a new
    sequence. Equal to any list, tuple or view with equal items; slicing returns a list.
    """

    __slots__ = ("_frozen", "_length", "_shared", "_tail")

    def __init__(
        self, shared: list[ChatMessage], frozen: int, tail: tuple[ChatMessage, ...] = ()
    ) -> None:
        self._shared = shared
        self._frozen = frozen
        self._tail = tail
        self._length = frozen + len(tail)

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[ChatMessage]:
        return chain(islice(self._shared, self._frozen), self._tail)

    @overload
    def __getitem__(self, index: int) -> ChatMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[ChatMessage]: ...

    def __getitem__(self, index: int | slice) -> ChatMessage | list[ChatMessage]:
        if isinstance(index, slice):
            return list(self)[index]
        position = index + self._length if index < 0 else index
        if not 0 <= position < self._length:
            raise IndexError("message index out of range")
        if position < self._frozen:
            return self._shared[position]
        return self._tail[position - self._frozen]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageView | list | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageView({list(self)!r})"


class History:
    """``once=False`` (``pipeline.offload.enable`` off) keeps one-time outputs in full."""

    def __init__(self, state: TraceState, *, once: bool = True) -> None:
        self.state = state
        self.once = once
        self._path: list[int] | None = None
        self._seen = 0
        self._last = 0
        self._dicts: list[ChatMessage] = []
        self._tokens: list[int] = []
        self._once: list[int] = []
        self._view: MessageView | None = None
        """The last view handed out, while it is still a prefix of ``_dicts``."""
        self.total_tokens = 0
        self.saved_tokens = 0
        """Estimated tokens the one-time outputs on the path no longer cost (full - note)."""
        self.assistant_count = 0
        self.last_assistant_index = -1

    def _reset(self) -> None:
        self._path = self.state.path
        self._seen = 0
        # New lists, never cleared in place: views handed out keep sharing the old ones.
        self._dicts, self._tokens, self._once = [], [], []
        self._view = None
        self.total_tokens = 0
        self.saved_tokens = 0
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
            if self._once:  # the only rewrite of an existing entry (never of a view's prefix)
                for earlier in self._once:
                    full = self._tokens[earlier]
                    self._set(earlier, _remembered(self.state.messages[self.state.path[earlier]]))
                    self.saved_tokens += max(full - self._tokens[earlier], 0)
                self._once.clear()
                self._view = None
            self.assistant_count += 1
            self.last_assistant_index = index
        as_dict = message.to_openai()
        self._dicts.append(as_dict)
        self._tokens.append(0)
        self._set(index, as_dict)
        if message.include_output_only_once and self.once:
            self._once.append(index)

    def _set(self, index: int, as_dict: ChatMessage) -> None:
        tokens = message_tokens(as_dict)
        self.total_tokens += tokens - self._tokens[index]
        self._tokens[index] = tokens
        self._dicts[index] = as_dict

    # ------------------------------------------------------------------ queries

    def messages(self) -> MessageView:
        """The path's messages as a read-only view (see the module doc): O(1) amortised, the
        same object again while nothing was added."""
        self.sync()
        dicts = self._dicts
        view = self._view
        if view is not None and len(view) == len(dicts):
            return view
        frozen = self._once[0] if self._once else len(dicts)
        self._view = MessageView(dicts, frozen, tuple(dicts[frozen:]))
        return self._view

    def extended(self, messages: Sequence[ChatMessage], count: int) -> Sequence[ChatMessage]:
        """``messages`` followed by the last ``count`` messages of the path — the ones the caller
        just emitted. When ``messages`` is the view :meth:`messages` last handed out and the
        path only grew since, that is the current view (O(1)); otherwise (a request another
        middleware rebuilt, e.g. Summarization's filter) a new list."""
        self.sync()
        start = len(self._dicts) - count
        if messages is self._view and len(messages) == start:
            return self.messages()
        return [*messages, *self._dicts[start:]]

    def complete_messages(self) -> list[ChatMessage]:
        """The path's messages without a trailing tool group that still lacks results: the
        shape a side request (summary, reflection) can send as is. A new list."""
        self.sync()
        if self.state.unanswered_tool_calls():
            return self._dicts[: self.last_assistant_index]
        return list(self._dicts)

    def at(self, indices: list[int]) -> list[ChatMessage]:
        self.sync()
        return [self._dicts[i] for i in indices]

    def tokens(self) -> int:
        self.sync()
        return self.total_tokens

    def tokens_at(self, indices: list[int]) -> int:
        self.sync()
        return sum(self._tokens[i] for i in indices)
