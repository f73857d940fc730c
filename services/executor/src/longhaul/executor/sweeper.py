"""The sweeper: finds traces the index says are ``running`` but nobody holds, and runs them.

That is how a trace recovers when its executor died and no wake-up is left to redeliver (for
instance one started by the sweeper itself). One replica sweeps at a time (a ``sweeper``
lease); entries touched within the last lease TTL are left alone, since their wake-up is most
likely still on its way. It reads only the traces marked unfinished (``lh_active``, kept by
:class:`~longhaul.core.index.TraceIndex`), so a sweep costs what is under way, not the whole
history. It also takes the default action of a question or approval waiting past its
deadline (:mod:`longhaul.executor.deadlines`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from longhaul.core.background import every
from longhaul.core.index import TraceIndex, TraceIndexEntry
from longhaul.domain.state.trace import FINAL_STATUSES
from longhaul.executor.deadlines import WaitDeadlines
from longhaul.executor.leases import Leases

log = logging.getLogger(__name__)

SWEEPER_KEY = "sweeper"


@dataclass(eq=False)
class Sweeper:
    index: TraceIndex
    leases: Leases
    wake: Callable[[str], bool]
    _: KW_ONLY
    interval_s: float
    deadlines: WaitDeadlines | None = None
    _backfilled: bool = field(default=False, init=False)

    async def run(self, shutdown: asyncio.Event) -> None:
        await every(self.interval_s, shutdown, self.sweep_once, log=log, what="sweep")

    async def sweep_once(self) -> list[str]:
        """Wake every orphaned running trace; returns their ids."""
        lease = await self.leases.acquire(SWEEPER_KEY)
        if lease is None:
            return []
        woken: list[str] = []
        try:
            if not self._backfilled:
                await self._backfill()
            quiet_since = time.time() - self.leases.ttl_s
            for trace_id in await self.index.active_ids():
                entry = await self.index.get(trace_id)
                if entry is None or entry.status in FINAL_STATUSES:
                    await self.index.unmark_active(trace_id)  # a stale mark
                    continue
                if self._overdue(entry):
                    await self.deadlines.take(trace_id)  # type: ignore[union-attr]
                    continue
                if entry.status != "running" or entry.updated_at > quiet_since:
                    continue
                if await self.leases.holder(Leases.trace_key(trace_id)) is not None:
                    continue
                if self.wake(trace_id):
                    woken.append(trace_id)
        finally:
            await lease.release()
        if woken:
            log.info("sweeper woke %d orphaned trace(s)", len(woken))
        return woken

    def _overdue(self, entry: TraceIndexEntry) -> bool:
        """A wait for a person past its deadline (``longhaul.executor.deadlines``)."""
        wait = entry.person_wait
        return (
            self.deadlines is not None
            and entry.status == "waiting"
            and wait is not None
            and wait.deadline is not None
            and wait.deadline <= time.time()
        )

    async def _backfill(self) -> None:
        """Once per process: mark every unfinished trace of the whole index (traces indexed
        before the marks existed); every later sweep reads only the marks."""
        marked = 0
        async for entry in self.index.entries():
            if entry.status not in FINAL_STATUSES:
                await self.index.mark_active(entry.trace_id)
                marked += 1
        self._backfilled = True
        log.info("sweeper: %d unfinished trace(s) in the index", marked)
