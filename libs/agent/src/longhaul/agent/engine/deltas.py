"""Token deltas to the live callback, merged per ``flush_interval_ms``.

Publishing every chunk of a fast stream costs more than the text is worth to a watcher; the
throttle concatenates chunks and flushes when the interval since the last flush has passed,
and always at the end. Concatenation is the only transformation, so the flushed pieces joined
equal the streamed text exactly. ``0`` flushes every chunk.
"""

from __future__ import annotations

from collections.abc import Callable

from longhaul.agent.contract import LiveCallback, LiveUpdate


class DeltaThrottle:
    def __init__(self, live: LiveCallback, interval_ms: int, clock: Callable[[], float]) -> None:
        self._live = live
        self._interval = interval_ms / 1000
        self._clock = clock
        self._buffer: list[str] = []
        self._last = clock()

    async def push(self, text: str) -> None:
        if not text:
            return
        self._buffer.append(text)
        now = self._clock()
        if now - self._last >= self._interval:
            await self.flush(now)

    async def flush(self, now: float | None = None) -> None:
        if self._buffer:
            text = "".join(self._buffer)
            self._buffer.clear()
            await self._live(LiveUpdate(kind="delta", text=text))
        self._last = self._clock() if now is None else now
