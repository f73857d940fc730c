"""A cap on the traces one API key has running at once (``gateway.max_active_traces_per_key``).

A request that would start a run (create, continue, rewind, resume…) beyond the cap is refused
with 429 and ``Retry-After`` before anything is written. Active means running or waiting,
sub-traces included (they inherit their root's key): a waiting trace still holds work that
resumes on its own. Counted from the index mirror; check-and-append is serialised per key in this
gateway, so one gateway never overshoots; several replicas each enforce the cap on what they
see, which can overshoot by the creations in flight between them.

Tasks (``/api/tasks``, a goal ``/api/runs`` routes to a team) count too, however they start: an
unfinished task is at least one active trace from its creation (it plans, waits for review, or
is between steps: work the key has set going), and its step traces (owned by the task's key)
count themselves when more than one runs. So a task is ``max(1, its active step traces)``.
Which tasks are unfinished this gateway knows from the tasks it started or resumed (their state
read at the check, finished ones forgotten); after a restart, tasks started before it count
only through their running step traces.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from longhaul.gateway.errors import ApiError
from longhaul.gateway.mirror import IndexMirror

ACTIVE = frozenset({"running", "waiting"})
RETRY_AFTER_S = 5


TaskActive = Callable[[str], Awaitable[bool]]
"""Whether the task of that id is unfinished (its state read from the log)."""


class ActiveQuota:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: dict[str, set[str]] = {}
        """Per owner, the tasks started through this gateway not yet seen finished."""

    async def active(self, mirror: IndexMirror, owner: str, task_active: TaskActive) -> int:
        entries = [
            entry
            for entry in mirror.entries.values()
            if entry.status in ACTIVE and mirror.owner_of(entry) == owner
        ]
        with_steps = {entry.task_id for entry in entries if entry.task_id}
        tasks = self._tasks.get(owner, set())
        for task_id in list(tasks):
            if not await task_active(task_id):
                tasks.discard(task_id)
        return len(entries) + len(tasks - with_steps)

    @contextlib.asynccontextmanager
    async def starting(
        self,
        mirror: IndexMirror,
        owner: str,
        task_active: TaskActive,
        task_id: str | None = None,
    ) -> AsyncIterator[None]:
        """Hold while a run is started for ``owner`` (``task_id``: a task, counted once the
        block succeeds); 429 when the key is at its cap."""
        if self.limit is None:
            yield
            return
        lock = self._locks.setdefault(owner, asyncio.Lock())
        async with lock:
            running = await self.active(mirror, owner, task_active)
            if running >= self.limit:
                raise ApiError(
                    429,
                    "too_many_active_traces",
                    f"this key has {running} traces running or waiting (limit {self.limit}); "
                    "wait for one to end or stop one",
                    details={"active": running, "limit": self.limit},
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                )
            yield
            if task_id is not None:
                self._tasks.setdefault(owner, set()).add(task_id)
