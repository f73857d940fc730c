"""What the gateway sees of the rest of the deployment: which executors are consuming (and
their sandbox state) and which providers' circuits are open, each read from its KV bucket with
a bounded watch. ``/readyz``, ``/metrics`` and erasure (which waits for no executor to hold a
trace) read them here.
"""

from __future__ import annotations

import contextlib
import json
import time

from longhaul.core.connection import Connection
from longhaul.domain.circuits import decode
from longhaul.domain.config import CircuitConfig

READY_TIMEOUT_S = 2.0
PRESENCE_FILTER = "executor.>"
"""Each executor holds ``executor.<id>`` in ``lh_leases`` (TTL, renewed) once its durable
consumer is bound, and deletes it when it stops: a present key is an executor consuming."""


async def presences(conn: Connection) -> list[str]:
    """The sandbox state each live ``executor.<id>`` key in ``lh_leases`` publishes (empty:
    no executor); a watch delivers each key's latest entry (deleted ones skipped), then
    ``None``."""
    kv = await conn.kv(conn.names.leases)
    watcher = await kv.watch(PRESENCE_FILTER, ignore_deletes=True)
    states: list[str] = []
    try:
        while True:
            entry = await watcher.updates(timeout=READY_TIMEOUT_S)
            if entry is None:
                return states
            if entry.operation is None:
                states.append(_sandbox_of(entry.value or b""))
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()


def _sandbox_of(value: bytes) -> str:
    try:
        state = json.loads(value).get("sandbox")
    except (ValueError, AttributeError):
        state = None
    return state if isinstance(state, str) else "unknown: the executor does not say"


async def open_circuits(conn: Connection, config: CircuitConfig) -> list[str]:
    """The providers every executor skips now (``longhaul.domain.circuits``), sorted: a watch
    delivers each key's latest entry, then ``None``."""
    kv = await conn.kv(conn.names.circuits)
    watcher = await kv.watch(">", ignore_deletes=True)
    now = time.time()
    providers: list[str] = []
    try:
        while (entry := await watcher.updates(timeout=READY_TIMEOUT_S)) is not None:
            if entry.operation is None and decode(entry.value).is_open(now, config):
                providers.append(entry.key)
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()
    return sorted(providers)
