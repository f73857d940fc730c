"""Live updates of a running turn on ``lh.live.<trace_id>`` (core NATS, not persisted).

Token deltas are coalesced and flushed every ``flush_interval_ms`` (0 = every chunk); any
other update first flushes the pending text, so watchers always see text and tool events in
the order they happened and never lose a character.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import msgspec
from longhaul.agent.contract import LiveUpdate
from nats.aio.client import Client

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()


class LivePublisher:
    def __init__(self, nc: Client, subject: str, *, flush_interval_ms: int) -> None:
        self.nc = nc
        self.subject = subject
        self.interval_s = max(0, flush_interval_ms) / 1000
        self._text: list[str] = []
        self._sequence: int | None = None
        self._flushed_at = 0.0
        self._timer: asyncio.Task[None] | None = None

    async def __call__(self, update: LiveUpdate) -> None:
        if update.kind == "delta" and self.interval_s > 0:
            self._text.append(update.text)
            self._sequence = update.sequence
            due = self._flushed_at + self.interval_s - time.monotonic()
            if due <= 0:
                await self.flush()
            elif self._timer is None:
                self._timer = asyncio.create_task(self._flush_later(due), name="live-flush")
            return
        await self.flush()
        await self._publish(update)

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._timer = None
        await self.flush()

    async def flush(self) -> None:
        if not self._text:
            return
        text, self._text = "".join(self._text), []
        self._flushed_at = time.monotonic()
        await self._publish(LiveUpdate(kind="delta", text=text, sequence=self._sequence))

    async def _publish(self, update: LiveUpdate) -> None:
        try:
            await self.nc.publish(self.subject, _encoder.encode(update))
        except Exception as exc:  # live updates are best-effort; the log is the truth
            log.debug("live update on %s dropped: %s", self.subject, exc)

    async def close(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        await self.flush()
