"""How full the stores are, and whether a new run may start.

The event stream and the object store carry JetStream size limits (``store.max_bytes``,
``store.object_max_bytes``) with ``discard: new``: at the limit JetStream refuses the publish
(error 10077, "maximum bytes exceeded") and keeps every message it has — with ``discard: old``
it would silently drop the oldest events, which for an event log is corruption. A full disk
(nats-server's own ``max_file_store``) refuses the same way (10023, "insufficient resources").

Refusals are the last line. Before them, :class:`StorageGauge` reads each stream's bytes and
limit and calls the store *full* once it holds ``1 - headroom`` of its limit: from then on the
gateway answers new runs 507 and every executor stops its running traces before their next
model call (``stopped {reason: storage_full}``), the headroom paying for those last events. A
write refused anyway marks its store full at once, until its bytes go down (traces deleted) or
its limit goes up. Nothing is polled in the background: a reader refreshes at most every
``refresh_s``, and on every look once a store is near its limit. What a running trace writes
past the line is at most the step it is in, so the headroom must hold one step of each trace
running at once; a write refused anyway leaves its trace running (its wake-up is handed back)
until there is room again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from longhaul.core.connection import Connection
from longhaul.core.transient import is_storage_full, is_transient, retry_transient

log = logging.getLogger(__name__)

__all__ = ["StorageGauge", "StorageStatus", "StoreUsage", "human", "is_storage_full"]


def human(size: int) -> str:
    """``3.8 MiB``: sizes as an operator reads them."""
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value:.1f} PiB"


@dataclass(frozen=True)
class StoreUsage:
    """One limited stream: what it holds and may hold."""

    store: str
    """``events`` or ``objects``."""
    stream: str
    setting: str
    used: int
    limit: int | None
    """Its ``max_bytes`` (None: no limit of its own, only the server's disk)."""

    @property
    def left(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.used)


@dataclass(frozen=True)
class StorageStatus:
    stores: tuple[StoreUsage, ...]
    full: str | None = None
    """Why no new run may start (None: there is room)."""


class StorageGauge:
    """The stores' fill level, read from JetStream at most every ``refresh_s``."""

    def __init__(self, conn: Connection, *, headroom: float, refresh_s: float = 0.5) -> None:
        self.conn = conn
        self.headroom = headroom
        self.refresh_s = refresh_s
        self._status: StorageStatus | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self._refused: dict[str, tuple[int, int | None, str]] = {}
        """Per store, the (bytes, limit) it had when a write was refused, and why."""

    def _streams(self) -> tuple[tuple[str, str, str], ...]:
        names = self.conn.names
        return (
            ("events", names.stream, "store.max_bytes"),
            ("objects", f"OBJ_{names.artifacts}", "store.object_max_bytes"),
        )

    async def status(self) -> StorageStatus:
        """The current status: cached for ``refresh_s`` while every store is far from full,
        read afresh on every look once one is near (within twice the headroom), so that a
        run's overshoot is at most the step each running trace is in."""
        if self._usable():  # every step of every trace asks: no lock while the cache holds
            assert self._status is not None
            return self._status
        async with self._lock:
            if not self._usable():
                self._status = await self._fresh()
                self._read_at = time.monotonic()
            assert self._status is not None
            return self._status

    def _usable(self) -> bool:
        status = self._status
        fresh = time.monotonic() - self._read_at < self.refresh_s
        return status is not None and fresh and not self._near(status)

    async def _fresh(self) -> StorageStatus:
        """A new reading; while the broker elects a leader, the last one (a store that filled
        meanwhile still refuses the write itself), else the election is waited out like any
        read: a check for room never turns a failover into a 503."""
        try:
            return await self._read()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if self._status is not None:
                log.info("storage figures unavailable (%r): using the last reading", exc)
                return self._status
            return await retry_transient(self._read, what="read the stores' sizes")

    def _near(self, status: StorageStatus) -> bool:
        margin = 1 - 2 * self.headroom
        return any(u.limit is not None and u.used >= u.limit * margin for u in status.stores)

    async def full(self) -> str | None:
        """Why no new run may start, or None."""
        return (await self.status()).full

    def refused(self, exc: BaseException) -> None:
        """A write was refused for room (:func:`is_storage_full`): every store counts as full
        until one of them shrinks or grows its limit."""
        stores = self._status.stores if self._status is not None else ()
        reason = f"a write was refused: {getattr(exc, 'description', None) or exc}"
        for usage in stores:
            self._refused[usage.store] = (usage.used, usage.limit, reason)
        if not stores:
            self._refused["events"] = (0, None, reason)
        self._read_at = 0.0  # read again at the next look

    async def _read(self) -> StorageStatus:
        stores = []
        for store, stream, setting in self._streams():
            info = await self.conn.js.stream_info(stream)
            limit = info.config.max_bytes
            bounded = limit if limit is not None and limit > 0 else None
            stores.append(StoreUsage(store, stream, setting, int(info.state.bytes or 0), bounded))
        return StorageStatus(tuple(stores), self._reason(stores))

    def _reason(self, stores: list[StoreUsage]) -> str | None:
        for usage in stores:
            refused = self._refused.get(usage.store)
            if refused is not None:
                used, limit, why = refused
                if usage.used < used or (usage.limit or 0) > (limit or 0):
                    del self._refused[usage.store]  # room came back
                else:
                    return f"{usage.store} store {usage.stream} is full ({why}); {_advice(usage)}"
            if usage.limit is not None and usage.used >= usage.limit * (1 - self.headroom):
                return (
                    f"{usage.store} store {usage.stream} is full: {human(usage.used)} of "
                    f"{human(usage.limit)} ({usage.setting}; the last "
                    f"{self.headroom:.0%} is kept for running traces to stop); {_advice(usage)}"
                )
        return None


def _advice(usage: StoreUsage) -> str:
    return f"delete traces or raise {usage.setting}"
