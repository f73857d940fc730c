"""Work a turn owes besides its events: keep the ``lh_traces`` entry current and snapshot the
fold every N events — both off the step's critical path.

The index is written at most every ``interval_s`` during a turn (and always when the turn
ends); snapshots are written by a background task, one at a time per trace, every
``snapshot_every`` events while the trace is small and every ~1/8 of its length once it is
long (:func:`snapshot_interval`): re-encoding a 20,000-message state every 200 events would
make snapshot work quadratic in the trace length, this keeps it linear while a resume still
replays at most a quarter of the log. Both read the live
state: ``EventStore.write_snapshot`` encodes it before its first await and events are applied
synchronously, so what it stores always matches the stream sequence it records.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

import msgspec
from longhaul.core.index import TraceIndex
from longhaul.core.state import TraceState
from longhaul.core.store import EventStore

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 10.0


def snapshot_interval(every: int, version: int) -> int:
    """``every``, or the power of two at or above ``version / 8`` once that is larger."""
    target = version // 8
    if target <= every:
        return every
    return 1 << (target - 1).bit_length()


class TurnUpkeep:
    def __init__(self, store: EventStore, index: TraceIndex, *, interval_s: float) -> None:
        self.store = store
        self.index = index
        self.interval_s = interval_s
        self._indexed_at = 0.0
        self._pending: set[asyncio.Task[Any]] = set()
        self._snapshotting = False

    def after_append(self, state: TraceState, previous_version: int) -> None:
        """Called after each applied event; starts background writes when due."""
        every = self.store.snapshot_every
        if every > 0:
            interval = snapshot_interval(every, state.version)
            if state.version // interval != previous_version // interval:
                self._snapshot(state)
        now = time.monotonic()
        if now - self._indexed_at >= self.interval_s:
            self._indexed_at = now
            copy = msgspec.structs.replace(state, totals=msgspec.structs.replace(state.totals))
            self._start(self.index.update(copy), "index")

    def _snapshot(self, state: TraceState) -> None:
        if self._snapshotting:
            return  # the next multiple of N will take one; a snapshot only saves replay time
        self._snapshotting = True
        self._start(self._write_snapshot(state), "snapshot")

    def _start(self, coro: Coroutine[Any, Any, Any], what: str) -> None:
        task = asyncio.create_task(coro, name=what)
        self._pending.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background %s write failed: %s", task.get_name(), task.exception())

    async def _write_snapshot(self, state: TraceState) -> None:
        try:
            await self.store.write_snapshot("trace", state.trace_id, state)
        finally:
            self._snapshotting = False

    async def finish(self, state: TraceState) -> None:
        """Wait for background writes (bounded) and write the final index entry."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=FLUSH_TIMEOUT_S)
        for task in list(self._pending):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.index.update(state)
