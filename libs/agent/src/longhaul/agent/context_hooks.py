"""Context hooks: named providers of text that ContextInjection periodically shows the model.

A deployment registers what an agent should be reminded of (open tickets, the state of a
shared workspace, a team's conventions); each hook sees the trace's state and returns text or
``None`` when it has nothing to say.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from longhaul.domain.state import TraceState

ContextHook = Callable[[TraceState], str | Awaitable[str | None] | None]


class ContextHooks:
    def __init__(self) -> None:
        self._hooks: dict[str, ContextHook] = {}

    def register(self, name: str, hook: ContextHook) -> None:
        self._hooks[name] = hook

    def __len__(self) -> int:
        return len(self._hooks)

    async def render(self, state: TraceState) -> list[tuple[str, str]]:
        """``(name, text)`` of every hook that had something to say, in registration order."""
        sections: list[tuple[str, str]] = []
        for name, hook in self._hooks.items():
            text = hook(state)
            if inspect.isawaitable(text):
                text = await text
            if text:
                sections.append((name, text))
        return sections
