"""When and how long to wait before retrying a model call.

Retries use exponential backoff with full jitter (a uniform delay between zero and the
exponential cap), which spreads a herd of clients hitting the same rate limit. A server's own
``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date) always wins over the backoff:
it knows when capacity returns.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})


def is_retryable_status(status: int) -> bool:
    """Timeouts, conflicts, too-early, rate limits and server errors may succeed later;
    400/401/403/404 and other client errors will not."""
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait, or None when it did not say."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


_QUOTA_WORDS = ("insufficient_quota", "billing", "credit balance", "payment required")
"""Not the bare word "quota": Gemini's per-minute rate limit is a 429 "Quota exceeded", which
passes with time and is retried like any 429."""


def outage_of_status(status: int, message: str) -> str | None:
    """The provider-side failure an HTTP error answer stands for (``None``: the request's own
    fault, e.g. a 400 for its content). A quota or billing refusal (402; OpenAI's 429
    ``insufficient_quota``; Anthropic's 400 "credit balance is too low") does not pass with
    time, so it is never retried, only fallen through."""
    lowered = message.lower()
    if status == 402 or (status in (400, 403, 429) and any(w in lowered for w in _QUOTA_WORDS)):
        return "quota"
    if status == 429:
        return "rate_limited"
    if status in (408, 504):
        return "timeout"
    if status >= 500:
        return "server_error"
    return None


def describe_status(status: int) -> str:
    if status == 429:
        return "rate limited (429)"
    if status >= 500:
        return f"server error ({status})"
    return f"HTTP {status}"


@dataclass
class RetryPolicy:
    """``sleep`` and ``rng`` are injectable so tests can observe waits without waiting."""

    max_retries: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_retry_after_s: float = 60.0
    """A ``Retry-After`` longer than this is an outage, not a wait: the call fails at once
    (a fallback model, if any, takes over)."""
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None:
            return retry_after
        cap = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return self.rng.uniform(0, cap)
