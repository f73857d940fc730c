"""Live updates of a running turn on ``lh.live.<trace_id>`` (core NATS, not persisted).

The engine already merges token deltas per ``flush_interval_ms``; this only encodes each
update as msgspec JSON and publishes it. Publishing is best-effort: the event log is the truth
and a watcher that missed a delta still gets the whole message from it.
"""

from __future__ import annotations

import logging

import msgspec
from longhaul.agent.contract import LiveUpdate
from nats.aio.client import Client

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()


class LivePublisher:
    def __init__(self, nc: Client, subject: str) -> None:
        self.nc = nc
        self.subject = subject

    async def __call__(self, update: LiveUpdate) -> None:
        try:
            await self.nc.publish(self.subject, _encoder.encode(update))
        except Exception as exc:
            log.debug("live update on %s dropped: %s", self.subject, exc)
