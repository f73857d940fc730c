"""One asyncio lock per key, for work that must not overlap on one aggregate: a consumer's
deliveries of one trace, a planner's wake-ups of one task, loads of one cached fold."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class KeyLocks:
    """One lock per key, dropped when nobody holds or waits for it."""

    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self.locks.setdefault(key, asyncio.Lock())
        self.users[key] = self.users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self.users[key] -= 1
            if not self.users[key]:
                del self.users[key]
                del self.locks[key]
