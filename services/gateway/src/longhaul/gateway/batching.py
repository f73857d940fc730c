"""Token deltas merged per client: the ``?flush_ms=`` of a trace's SSE and WebSocket streams.

The executor already merges deltas every ``pipeline.streaming.flush_interval_ms`` for all
watchers; a client on a slow link or one that redraws rarely asks for fewer, larger frames
without changing what anyone else receives. The first delta of a window starts a timer; the
window's deltas go out as one ``live`` item when it fires. Anything else (a tool notice, a
delta of another message, a stored event) flushes the window first, so order is kept and the
merged texts joined still equal the streamed text exactly. ``0`` passes every delta through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from longhaul.agent.contract import LiveUpdate

FLUSH_MS_MAX = 10_000
"""A longer window would only hold text back that the stored message delivers anyway."""


class DeltaBatcher:
    def __init__(self, emit: Callable[[LiveUpdate], None], flush_ms: int) -> None:
        self._emit = emit
        self._interval = flush_ms / 1000
        self._pending: LiveUpdate | None = None
        self._pieces: list[str] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, update: LiveUpdate) -> None:
        mergeable = update.kind == "delta" and self._interval > 0
        if not mergeable or (self._pending and self._pending.sequence != update.sequence):
            self.flush()
        if not mergeable:
            self._emit(update)
            return
        if self._pending is None:
            self._pending = update
            self._timer = asyncio.get_running_loop().call_later(self._interval, self.flush)
        self._pieces.append(update.text)

    def flush(self) -> None:
        """Send the window's deltas as one (a no-op when none are waiting)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._pending is not None:
            text = "".join(self._pieces)
            merged = LiveUpdate(kind="delta", text=text, sequence=self._pending.sequence)
            self._pending = None
            self._pieces.clear()
            self._emit(merged)

    def close(self) -> None:
        """The stream is over: drop the window (the stored message carries its text)."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._pending = None
        self._pieces.clear()
