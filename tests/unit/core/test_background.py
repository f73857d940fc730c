"""``background.every``: the periodic loop the executor's sweeper and the gateway's retention
share — a failing step is logged and tried again, shutdown ends the loop."""

from __future__ import annotations

import asyncio
import logging

import pytest
from longhaul.core.background import every


async def test_a_failing_step_is_logged_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    shutdown = asyncio.Event()
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("first sweep breaks")
        shutdown.set()

    with caplog.at_level(logging.ERROR):
        await asyncio.wait_for(
            every(0, shutdown, step, log=logging.getLogger("t"), what="sweep"), timeout=10
        )
    assert calls == 2
    assert [r.getMessage() for r in caplog.records] == ["sweep failed; trying again next interval"]


async def test_shutdown_before_the_first_interval_runs_nothing() -> None:
    shutdown = asyncio.Event()
    shutdown.set()
    ran: list[int] = []

    async def step() -> None:
        ran.append(1)

    await every(3600, shutdown, step, log=logging.getLogger("t"), what="sweep")
    assert ran == []
