"""``Batch``: events to emit together, with message sequences allocated ahead of the fold.

The fold numbers messages ``last_sequence + 1`` and chains them under the head; a batch that
holds several messages must do the same arithmetic before any of them is applied.
"""

from __future__ import annotations

from typing import Any

from longhaul.domain.events import MessageAppended, TraceEvent
from longhaul.domain.state import TraceState

_HEAD = object()


class Batch:
    def __init__(self, state: TraceState) -> None:
        self._next = state.last_sequence + 1
        self._parent: int | None = state.head_sequence or None
        self._goal = state.goals.focus
        self.events: list[TraceEvent] = []

    def message(
        self, role: Any, *, parent: int | object | None = _HEAD, **fields: Any
    ) -> MessageAppended:
        """Append a message under the batch's head (or under ``parent``); a message aside
        (reflection, side branch) never becomes the head, as in the fold."""
        parent_sequence = self._parent if parent is _HEAD else parent
        fields.setdefault("goal_id", self._goal)
        message = MessageAppended(
            sequence=self._next,
            parent_sequence=parent_sequence,  # type: ignore[arg-type]
            role=role,
            **fields,
        )
        self._next += 1
        if not message.aside:
            self._parent = message.sequence
        self.events.append(message)
        return message

    def add(self, event: TraceEvent) -> None:
        self.events.append(event)

    def __bool__(self) -> bool:
        return bool(self.events)
