"""A cap on the traces one API key has running at once (``gateway.max_active_traces_per_key``).

A request that would start a run (create, continue, rewind, resume…) beyond the cap is refused
with 429 and ``Retry-After`` before anything is written. Active means running or waiting,
sub-traces included (they inherit their root's key): a waiting trace still holds work that
resumes on its own. Counted from the index mirror; check-and-append is serialised per key in this
gateway, so one gateway never overshoots; several replicas each enforce the cap on what they
see, which can overshoot by the creations in flight between them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from longhaul.gateway.errors import ApiError
from longhaul.gateway.mirror import IndexMirror

ACTIVE = frozenset({"running", "waiting"})
RETRY_AFTER_S = 5


class ActiveQuota:
    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._locks: dict[str, asyncio.Lock] = {}

    def active(self, mirror: IndexMirror, owner: str) -> int:
        return sum(
            1
            for entry in mirror.entries.values()
            if entry.status in ACTIVE and mirror.owner_of(entry) == owner
        )

    @contextlib.asynccontextmanager
    async def starting(self, mirror: IndexMirror, owner: str) -> AsyncIterator[None]:
        """Hold while a run is started for ``owner``; 429 when the key is at its cap."""
        if self.limit is None:
            yield
            return
        lock = self._locks.setdefault(owner, asyncio.Lock())
        async with lock:
            running = self.active(mirror, owner)
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
