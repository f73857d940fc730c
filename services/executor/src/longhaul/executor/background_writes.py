"""Work a turn owes besides its events: keep the ``lh_traces`` entry current and let the
snapshots the trace repository starts finish — both off the step's critical path.

The index is written at most every ``interval_s`` during a turn (and always when the turn
ends). Snapshots are taken by the repository when due (``longhaul.core.snapshots``: every
``snapshot_every`` events, then every ~1/8 of the log); this owns them for the turn
(:attr:`TurnBackgroundWrites.snapshots`), snapshots the end of a long turn
(:meth:`TurnBackgroundWrites.at_rest`) and waits for them, bounded, when the turn ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any

import msgspec
from longhaul.core.background import drain
from longhaul.core.index import TraceIndex
from longhaul.core.snapshots import Snapshots
from longhaul.domain.state import TraceState

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 10.0


class TurnBackgroundWrites:
    def __init__(self, snapshots: Snapshots, index: TraceIndex, *, interval_s: float) -> None:
        self.index = index
        self.interval_s = interval_s
        self.snapshots = snapshots
        """The turn's own: given to its trace repository, which starts snapshots when due."""
        self._indexed_at = 0.0
        self._pending: set[asyncio.Task[Any]] = set()

    def after_append(self, state: TraceState) -> None:
        """Called after each applied event; starts a background index write when due."""
        now = time.monotonic()
        if now - self._indexed_at >= self.interval_s:
            self._indexed_at = now
            copy = msgspec.structs.replace(state, usage=state.usage.copy())
            self._start(self.index.update(copy), "index")

    def _start(self, coro: Coroutine[Any, Any, Any], what: str) -> None:
        task = asyncio.create_task(coro, name=what)
        self._pending.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background %s write failed: %s", task.get_name(), task.exception())

    async def at_rest(self, state: TraceState) -> None:
        """The turn ended and its appends landed: snapshot the end of a long turn (``every``
        events or more since its last snapshot), so a resume replays none of it."""
        await self.snapshots.at_rest("trace", state.trace_id, state, FLUSH_TIMEOUT_S)

    async def finish(self, state: TraceState) -> None:
        """Wait for background writes (bounded) and write the final index entry."""
        await self.snapshots.flush(FLUSH_TIMEOUT_S)
        await drain(self._pending, FLUSH_TIMEOUT_S)
        await self.index.update(state)
