"""Snapshots taken when due, off the writer's critical path.

A :class:`Repository` given a :class:`Snapshots` asks it after every applied event
(:meth:`Snapshots.after_save`); a snapshot is due every ``snapshot_every`` events while the
aggregate is small and every ~1/8 of its length once it is long (:func:`snapshot_interval`):
re-encoding a 20,000-message state every 200 events would make snapshot work quadratic in the
log's length, this keeps it linear while a load still replays at most a quarter of the log.
Snapshots are written by a background task, one at a time per aggregate, from the state as
encoded when the save was applied (:func:`~longhaul.core.store.pack_snapshot`): the fold then
matches the stream sequence it records, which it need not a moment later (write-behind applies
an event before its append lands). The owner calls
:meth:`Snapshots.flush` when it is done writing (an executor at the end of a turn).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from longhaul.core.background import drain
from longhaul.core.eventlog import EventLog
from longhaul.core.store import PackedSnapshot, pack_snapshot
from longhaul.domain.events import Aggregate
from longhaul.domain.state import Fold

log = logging.getLogger(__name__)


def snapshot_interval(every: int, version: int) -> int:
    """``every``, or the power of two at or above ``version / 8`` once that is larger."""
    target = version // 8
    if target <= every:
        return every
    return 1 << (target - 1).bit_length()


class Snapshots:
    def __init__(self, store: EventLog) -> None:
        self.store = store
        self._writing: set[tuple[Aggregate, str]] = set()
        self._pending: set[asyncio.Task[Any]] = set()

    def due(self, version: int, previous_version: int) -> bool:
        every = self.store.snapshot_every
        if every <= 0:
            return False
        interval = snapshot_interval(every, version)
        return version // interval != previous_version // interval

    def after_save(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        state: Fold,
        previous_version: int,
    ) -> None:
        """Start a background snapshot if one is due and none is being written."""
        key = (aggregate, aggregate_id)
        if not self.due(state.version, previous_version) or key in self._writing:
            return  # a skipped one is taken at the next interval: it only saves replay time
        self._writing.add(key)
        packed = pack_snapshot(state)
        task = asyncio.create_task(self._write(key, packed), name=f"snapshot-{aggregate_id}")
        self._pending.add(task)
        task.add_done_callback(self._done)

    async def _write(self, key: tuple[Aggregate, str], packed: PackedSnapshot) -> None:
        aggregate, aggregate_id = key
        try:
            await self.store.write_packed_snapshot(aggregate, aggregate_id, packed)
        finally:
            self._writing.discard(key)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background snapshot write failed: %s", task.exception())

    async def flush(self, timeout_s: float) -> None:
        """Wait (bounded) for snapshots being written; cancel what is left."""
        await drain(self._pending, timeout_s)
