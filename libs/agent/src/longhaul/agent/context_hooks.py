"""Context hooks: named providers of text that ContextInjection periodically shows the model.

A deployment registers what an agent should be reminded of (open tickets, the state of a
shared workspace, a team's conventions): in code with :meth:`ContextHooks.register`, or in
configuration (``pipeline.context_hooks``: ``package.module:function`` or an entry point of
the ``longhaul.context_hooks`` group). Each hook is called as ``hook(trace_state, goal_tree)``
and returns text, or ``None`` when it has nothing to say. A hook that raises is logged and
skipped: someone else's reminder never stops a run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable

from longhaul.agent import plugins
from longhaul.domain.state import GoalTree, TraceState

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "longhaul.context_hooks"

ContextHook = Callable[[TraceState, GoalTree], str | Awaitable[str | None] | None]


class ContextHooks:
    def __init__(self) -> None:
        self._hooks: dict[str, ContextHook] = {}

    @classmethod
    def configured(cls, targets: Iterable[str]) -> ContextHooks:
        """The hooks ``pipeline.context_hooks`` names; a target that does not load or is not
        callable is a ``ValueError`` naming it."""
        hooks = cls()
        for index, target in enumerate(targets):
            where = f"pipeline.context_hooks[{index}]"
            found = plugins.load(target, group=ENTRY_POINT_GROUP, where=where)
            if not callable(found):
                raise ValueError(f"{where}: {target!r} is not callable")
            hooks.register(target, found)
        return hooks

    def register(self, name: str, hook: ContextHook) -> None:
        self._hooks[name] = hook

    def __len__(self) -> int:
        return len(self._hooks)

    async def render(self, state: TraceState) -> list[tuple[str, str]]:
        """``(name, text)`` of every hook that had something to say, in registration order."""
        sections: list[tuple[str, str]] = []
        for name, hook in self._hooks.items():
            try:
                text = hook(state, state.goals)
                if inspect.isawaitable(text):
                    text = await text
            except Exception:
                log.exception("context hook %s failed on trace %s; skipped", name, state.trace_id)
                continue
            if text:
                sections.append((name, str(text)))
        return sections
