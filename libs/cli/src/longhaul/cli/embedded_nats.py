"""The embedded nats-server of ``longhaul up``, supervised like the services: when it dies it is
started again on the same port with the same store directory (JetStream recovers the log from
it), after the same backoff and with the same log line. The services' clients reconnect by
themselves meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from longhaul.cli.supervisor import restart_delay
from longhaul.core.nats_server import NatsServer, NatsServerError

log = logging.getLogger(__name__)


class SupervisedNats:
    def __init__(self, server: NatsServer, *, on_change: Callable[[], None] | None = None) -> None:
        self.server = server
        self._on_change = on_change
        self._stopping = asyncio.Event()
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.server.astart()
        self._watcher = asyncio.create_task(self._watch(), name="nats-server")

    async def _watch(self) -> None:
        restarts = 0
        started_at = time.monotonic()
        while not self._stopping.is_set():
            code = await self.server.wait_exit()
            if self._stopping.is_set():
                return
            delay, restarts = restart_delay(restarts, started_at)
            log.warning("nats-server exited with %s; restarting in %.1fs", code, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
            if self._stopping.is_set():
                return
            try:
                await self.server.astart()
            except NatsServerError as exc:
                log.warning("nats-server did not restart: %s", exc)
                continue
            started_at = time.monotonic()
            if self._on_change is not None:
                self._on_change()

    async def stop(self) -> None:
        self._stopping.set()
        await self.server.astop()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
