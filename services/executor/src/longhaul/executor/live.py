"""Live updates of a running turn on ``lh.live.<trace_id>`` (core NATS, not persisted).

The engine already merges token deltas per ``flush_interval_ms``; this only encodes each
update as msgspec JSON and publishes it. Publishing is best-effort: the event log is the truth
and a watcher that missed a delta still gets the whole message from it.

A tool call is announced only if it is still running :data:`TOOL_START_DELAY_S` after it
started (``tool_start``, sent by a task the publisher owns, then its ``tool_end``): a watcher
gains nothing from a "running…" that ends at once, and the call's result reaches it from the
log anyway. A fast step so publishes nothing for its call, which saves a tenth of its CPU.
"""

from __future__ import annotations

import asyncio
import logging

import msgspec
from longhaul.agent.contract import LiveUpdate
from nats.aio.client import Client

log = logging.getLogger(__name__)

TOOL_START_DELAY_S = 0.2

_encoder = msgspec.json.Encoder()


class LivePublisher:
    def __init__(self, nc: Client, subject: str) -> None:
        self.nc = nc
        self.subject = subject
        self._waiting: dict[str, asyncio.TimerHandle] = {}
        self._sending: dict[str, asyncio.Task[None]] = {}

    async def __call__(self, update: LiveUpdate) -> None:
        call_id = update.tool_call_id
        if update.kind == "tool_start" and call_id:
            loop = asyncio.get_running_loop()
            self._waiting[call_id] = loop.call_later(TOOL_START_DELAY_S, self._start, update)
            return
        if update.kind == "tool_end" and call_id:
            waiting = self._waiting.pop(call_id, None)
            if waiting is not None:
                waiting.cancel()  # a fast call: never announced, so nothing to end
                return
            sending = self._sending.get(call_id)
            if sending is not None:
                await asyncio.gather(sending, return_exceptions=True)  # start before end
        await self._publish(update)

    def _start(self, update: LiveUpdate) -> None:
        call_id = update.tool_call_id
        assert call_id is not None
        self._waiting.pop(call_id, None)
        task = asyncio.create_task(self._publish(update), name=f"live-start-{call_id}")
        self._sending[call_id] = task
        task.add_done_callback(lambda _: self._sending.pop(call_id, None))

    async def _publish(self, update: LiveUpdate) -> None:
        try:
            await self.nc.publish(self.subject, _encoder.encode(update))
        except Exception as exc:
            log.debug("live update on %s dropped: %s", self.subject, exc)

    async def close(self) -> None:
        """Drop the starts not sent yet (the turn is over) and wait for those being sent."""
        for waiting in self._waiting.values():
            waiting.cancel()
        self._waiting.clear()
        await asyncio.gather(*self._sending.values(), return_exceptions=True)
