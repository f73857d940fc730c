"""The deployment's circuit breaker (``longhaul.agent.contract.ProviderBreaker``) over the
``lh_circuits`` KV bucket: one key per provider, written by compare-and-set so executors
racing on the same provider each count once and only one of them probes a half-open circuit
(``longhaul.domain.circuits``). A KV failure never stops a model call: the breaker only
saves calls, so it lets the call through and logs."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.domain.circuits import Circuit, decode, encode
from longhaul.domain.config import CircuitConfig
from nats.errors import Error as NatsError
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

log = logging.getLogger(__name__)

ATTEMPTS = 5
"""Compare-and-set rounds before giving up on one update (a burst of executors)."""


def circuit_key(provider: str) -> str:
    return re.sub(r"[^A-Za-z0-9_=-]", "_", provider) or "_"


@dataclass(eq=False)
class KvBreaker:
    conn: Connection
    config: CircuitConfig
    _: KW_ONLY
    clock: Callable[[], float] = time.time

    async def allow(self, provider: str) -> bool:
        if not self.config.failures:
            return True
        try:
            return await self._allow(provider)
        except NatsError as exc:
            log.warning("circuit of %s unreadable (%s): calling it", provider, exc)
            return True

    async def failed(self, provider: str) -> None:
        if self.config.failures:
            await self._update(provider, lambda c, now: c.failed(now, self.config))

    async def succeeded(self, provider: str) -> None:
        if self.config.failures:
            await self._update(provider, lambda c, now: None if c.clean else Circuit())

    async def _allow(self, provider: str) -> bool:
        kv = await self.conn.kv(self.conn.names.circuits)
        key = circuit_key(provider)
        for _ in range(ATTEMPTS):
            entry = await get_entry(kv, key)
            circuit = decode(entry.value if entry else None)
            now = self.clock()
            if entry is None or circuit.opened_at is None:
                return True
            if circuit.is_open(now, self.config):
                return False
            try:  # half-open: whoever writes the probe first calls the provider
                await kv.update(key, encode(circuit.probe(now, self.config)), last=entry.revision)
            except KeyWrongLastSequenceError:
                continue
            log.info("circuit of %s half-open: probing", provider)
            return True
        return False

    async def _update(
        self, provider: str, change: Callable[[Circuit, float], Circuit | None]
    ) -> None:
        try:
            kv = await self.conn.kv(self.conn.names.circuits)
            for _ in range(ATTEMPTS):
                if await self._try(kv, circuit_key(provider), provider, change):
                    return
        except NatsError as exc:
            log.warning("circuit of %s not updated: %s", provider, exc)

    async def _try(
        self,
        kv: KeyValue,
        key: str,
        provider: str,
        change: Callable[[Circuit, float], Circuit | None],
    ) -> bool:
        entry = await get_entry(kv, key)
        circuit = decode(entry.value if entry else None)
        changed = change(circuit, self.clock())
        if changed is None:
            return True
        try:
            if entry is None:
                await kv.create(key, encode(changed))
            else:
                await kv.update(key, encode(changed), last=entry.revision)
        except KeyWrongLastSequenceError:
            return False
        if changed.opened_at is not None and circuit.opened_at is None:
            log.warning("circuit of %s opened: skipped for %.0f s", provider, self.config.open_s)
        elif changed.clean and not circuit.clean:
            log.info("circuit of %s closed", provider)
        return True
