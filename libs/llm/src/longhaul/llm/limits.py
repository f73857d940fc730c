"""Client-side limits for one provider endpoint.

Providers enforce requests-per-minute and tokens-per-minute quotas and answer 429 beyond them;
waiting here first is cheaper than being throttled, and the concurrency cap keeps a burst of
sub-agents from opening hundreds of streams at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager


class TokenBucket:
    """``per_minute`` units that refill continuously; a debit may drive it negative (a
    completion longer than expected), which simply makes the next caller wait longer."""

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._clock = clock
        self._level = self.capacity
        self._stamp = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now

    def wait_time(self, amount: float) -> float:
        """Seconds until ``amount`` (at most the capacity) is available."""
        self._refill()
        missing = min(amount, self.capacity) - self._level
        return max(missing / self.rate, 0.0)

    def debit(self, amount: float) -> None:
        self._refill()
        self._level -= amount


class RateLimiter:
    """Requests-per-minute and tokens-per-minute, either of which may be unlimited."""

    def __init__(
        self,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._requests = TokenBucket(requests_per_minute, clock) if requests_per_minute else None
        self._tokens = TokenBucket(tokens_per_minute, clock) if tokens_per_minute else None
        self._sleep = sleep
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int) -> None:
        """Wait (first come, first served) until one request of ``tokens`` fits."""
        async with self._lock:
            while True:
                wait = max(
                    self._requests.wait_time(1) if self._requests else 0.0,
                    self._tokens.wait_time(tokens) if self._tokens else 0.0,
                )
                if wait <= 0:
                    break
                await self._sleep(wait)
            if self._requests:
                self._requests.debit(1)
            if self._tokens:
                self._tokens.debit(tokens)

    def record(self, tokens: int) -> None:
        """Charge tokens learned after the call (the completion)."""
        if self._tokens and tokens > 0:
            self._tokens.debit(tokens)


class CallLimits:
    """Concurrency cap plus rate limits, taken together around each HTTP attempt."""

    def __init__(self, max_concurrency: int, rate: RateLimiter) -> None:
        self._slots = asyncio.Semaphore(max_concurrency)
        self.rate = rate

    @asynccontextmanager
    async def slot(self, prompt_tokens: int) -> AsyncIterator[None]:
        async with self._slots:
            await self.rate.acquire(prompt_tokens)
            yield
