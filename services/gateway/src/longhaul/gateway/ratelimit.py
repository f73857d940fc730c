"""Per-key token buckets: a steady rate with a burst of one minute's worth.

The bucket is in-process: with several gateway replicas each enforces its own share, which is
the usual trade for not putting a shared counter on every request's path.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """``per_minute`` requests per key, refilled continuously; 0 disables the limit."""

    MAX_KEYS = 10_000

    def __init__(self, per_minute: int) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def acquire(self, key: str, now: float | None = None) -> float:
        """Take one token; returns 0 on success, else the seconds until one is available."""
        if not self.enabled:
            return 0.0
        now = time.monotonic() if now is None else now
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.MAX_KEYS:
                self._evict_full(now)
            bucket = self._buckets[key] = _Bucket(self.capacity, now)
        bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.stamp) * self.rate)
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def _evict_full(self, now: float) -> None:
        """Forget buckets that have refilled completely: they hold no information."""
        full = [
            key
            for key, bucket in self._buckets.items()
            if bucket.tokens + (now - bucket.stamp) * self.rate >= self.capacity
        ]
        for key in full:
            del self._buckets[key]


def retry_after_header(wait_s: float) -> str:
    """``Retry-After`` takes whole seconds; round up so a client that obeys it succeeds."""
    return str(max(1, math.ceil(wait_s)))
