"""The circuit breaker's shared state in KV (``longhaul.executor.circuits``): two breakers
stand for two executors on one deployment; the clock is injected, so "later" is a number."""

from __future__ import annotations

import asyncio

from longhaul.core.connection import Connection
from longhaul.domain.config import CircuitConfig
from longhaul.executor.circuits import KvBreaker

CONFIG = CircuitConfig(failures=3, window_s=60, open_s=30)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_failures_open_the_circuit_for_every_executor_and_a_probe_closes_it(
    conn: Connection,
) -> None:
    clock = Clock()
    a, b = KvBreaker(conn, CONFIG, clock=clock), KvBreaker(conn, CONFIG, clock=clock)
    await a.failed("openai")
    await b.failed("openai")
    assert await a.allow("openai") and await b.allow("openai")  # 2 of 3: still closed
    await b.failed("openai")
    assert not await a.allow("openai") and not await b.allow("openai")
    assert await a.allow("anthropic")  # per provider
    clock.now += CONFIG.open_s
    # half-open: one probe for the whole deployment, whoever asks first
    probes = await asyncio.gather(a.allow("openai"), b.allow("openai"), a.allow("openai"))
    assert sorted(probes) == [False, False, True]
    await a.succeeded("openai")  # the provider is back
    assert await a.allow("openai") and await b.allow("openai")
    await a.failed("openai")  # counting starts over after the close
    assert await b.allow("openai")


async def test_a_failed_probe_opens_the_circuit_again(conn: Connection) -> None:
    clock = Clock()
    a, b = KvBreaker(conn, CONFIG, clock=clock), KvBreaker(conn, CONFIG, clock=clock)
    for _ in range(3):
        await a.failed("gemini")
    clock.now += CONFIG.open_s
    assert await b.allow("gemini")
    await b.failed("gemini")
    assert not await a.allow("gemini")
    clock.now += CONFIG.open_s - 1
    assert not await a.allow("gemini")


async def test_failures_outside_the_window_do_not_count(conn: Connection) -> None:
    clock = Clock()
    breaker = KvBreaker(conn, CONFIG, clock=clock)
    for _ in range(2):
        await breaker.failed("openai")
    clock.now += CONFIG.window_s
    await breaker.failed("openai")
    assert await breaker.allow("openai")


async def test_concurrent_failures_each_count(conn: Connection) -> None:
    """Compare-and-set: executors failing at once do not overwrite each other's count."""
    clock = Clock()
    breakers = [KvBreaker(conn, CONFIG, clock=clock) for _ in range(3)]
    await asyncio.gather(*(b.failed("openai") for b in breakers))
    assert not await breakers[0].allow("openai")
