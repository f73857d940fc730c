"""Things a tool opens for the rest of a turn (a browser), closed when the turn ends.

A turn runs its tool calls one after another; a tool that needs state across calls of the
same turn (the page the browser has open) asks :meth:`TurnResources.get` for it, and the
engine closes everything when the turn ends, however it ends. Nothing outlives the turn, so
nothing leaks across turns or traces.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, TypeVar, cast

T = TypeVar("T")


class TurnResources:
    def __init__(self) -> None:
        self._stack = AsyncExitStack()
        self._open: dict[str, Any] = {}

    async def get(self, key: str, opener: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """The resource under ``key``, entered on first use (a failed open is not kept)."""
        if key not in self._open:
            self._open[key] = await self._stack.enter_async_context(opener())
        return cast(T, self._open[key])

    async def aclose(self) -> None:
        self._open.clear()
        await self._stack.aclose()
