"""Retention: ended top-level traces deleted once ``retention.<status>`` has passed.

The sweeper's cost follows what expires, not what exists: the index mirror, which sees every
index entry anyway, hands each ended top-level trace to :meth:`Retention.observe`, which
pushes ``(expires_at, trace_id)`` on a heap ordered by expiry; a sweep pops only what has
expired. A popped item is checked against the mirror's current entry (a resumed trace, a
deleted one or one whose end moved is skipped; its new end was pushed when it was observed),
then deleted exactly as ``DELETE /api/traces/{id}`` does (``erase.erase_trace_family``). Several
gateways may sweep the same index: a second delete of a trace finds it gone and does nothing.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time

from longhaul.core.background import every
from longhaul.core.config import RetentionConfig
from longhaul.core.index import TraceIndexEntry
from longhaul.domain.state.trace import FINAL_STATUSES
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.usecases import erase

log = logging.getLogger(__name__)


def _is_root(entry: TraceIndexEntry) -> bool:
    return entry.parent_trace_id is None and entry.task_id is None


class Retention:
    def __init__(self, runtime: Runtime, config: RetentionConfig) -> None:
        self.runtime = runtime
        self.config = config
        self._due: list[tuple[float, str]] = []

    @property
    def enabled(self) -> bool:
        return any(self.config.keep_s(status) for status in FINAL_STATUSES)

    def _expiry(self, entry: TraceIndexEntry) -> float | None:
        keep = self.config.keep_s(entry.status)
        if keep is None or not _is_root(entry):
            return None
        return entry.updated_at + keep

    def observe(self, entry: TraceIndexEntry) -> None:
        """The mirror took ``entry``: schedule it if it is an ended top-level trace."""
        expires = self._expiry(entry)
        if expires is not None:
            heapq.heappush(self._due, (expires, entry.trace_id))

    def _expired(self, now: float) -> list[TraceIndexEntry]:
        """Pop what has expired and still is as it was scheduled."""
        found: dict[str, TraceIndexEntry] = {}
        while self._due and self._due[0][0] <= now:
            _, trace_id = heapq.heappop(self._due)
            entry = self.runtime.mirror.entries.get(trace_id)
            expires = None if entry is None else self._expiry(entry)
            if entry is not None and expires is not None and expires <= now:
                found[trace_id] = entry
        return list(found.values())

    async def sweep_once(self, now: float | None = None) -> int:
        """Delete the expired traces; returns how many top-level traces went."""
        removed = 0
        for entry in self._expired(time.time() if now is None else now):
            owner = self.runtime.mirror.owner_of(entry)
            try:
                report, _ = await erase.erase_trace_family(self.runtime, owner, entry.trace_id)
            except ApiError as exc:  # gone meanwhile (404), still stopping (409), NATS away
                log.info("retention: %s not deleted: %s", entry.trace_id, exc.message)
                if exc.status != 404:  # the next sweep tries again
                    retry = time.time() + self.config.sweep_interval_s
                    heapq.heappush(self._due, (retry, entry.trace_id))
                continue
            metrics = self.runtime.metrics
            metrics.retention_traces.labels(entry.status).inc(len(report.ids))
            metrics.retention_events.inc(report.events)
            removed += 1
        if removed:
            log.info("retention: deleted %d expired trace(s)", removed)
        return removed

    async def run(self, shutdown: asyncio.Event) -> None:
        """Sweep every ``retention.sweep_interval_s`` until ``shutdown``."""
        interval_s = self.config.sweep_interval_s
        await every(interval_s, shutdown, self.sweep_once, log=log, what="retention sweep")
