"""Retry timing rules and client-side limits (pure; clocks and sleeps are injected)."""

from __future__ import annotations

import asyncio
import random
from contextlib import AsyncExitStack
from datetime import UTC, datetime

import pytest
from longhaul.llm.limits import CallLimits, RateLimiter
from longhaul.llm.retry import RetryPolicy, is_retryable_status, parse_retry_after

NOW = datetime(2015, 10, 21, 7, 27, 55, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "0.2"}, 0.2),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 5.0),
        ({"retry-after": "Wed, 21 Oct 2015 07:00:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "x", "retry-after": "1"}, 1.0),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500, 502, 503, 529])
def test_retryable_statuses(status: int) -> None:
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_client_errors_are_final(status: int) -> None:
    assert not is_retryable_status(status)


def test_full_jitter_stays_under_the_exponential_cap() -> None:
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=4.0, rng=random.Random(7))
    for attempt in range(1, 10):
        cap = min(4.0, 0.5 * 2 ** (attempt - 1))
        delays = [policy.delay(attempt, None) for _ in range(50)]
        assert all(0 <= d <= cap for d in delays)
        assert max(delays) > cap / 2
    assert policy.delay(3, 12.5) == 12.5


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_requests_per_minute() -> None:
    time = FakeTime()
    limiter = RateLimiter(requests_per_minute=2, clock=time.clock, sleep=time.sleep)
    for _ in range(3):
        await limiter.acquire(0)
    assert time.slept == [pytest.approx(30.0)]


async def test_tokens_per_minute_counts_prompt_and_recorded_completion() -> None:
    time = FakeTime()
    limiter = RateLimiter(tokens_per_minute=6000, clock=time.clock, sleep=time.sleep)
    await limiter.acquire(5000)
    limiter.record(2000)
    await limiter.acquire(1000)
    assert time.slept == [pytest.approx(20.0)]
    await limiter.acquire(10_000)
    assert time.now == pytest.approx(80.0)


async def test_concurrency_cap_blocks_the_extra_call() -> None:
    limits = CallLimits(2, RateLimiter())
    async with AsyncExitStack() as held:
        await held.enter_async_context(limits.slot(1))
        await held.enter_async_context(limits.slot(1))

        async def third() -> str:
            async with limits.slot(1):
                return "in"

        task = asyncio.create_task(third())
        done, _ = await asyncio.wait({task}, timeout=0.05)
        assert not done
    assert await task == "in"
