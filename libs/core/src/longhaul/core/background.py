"""Owned background tasks: wait for them a bounded time at the end, then cancel the rest; and
the periodic loop of a service's sweeps."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any


async def drain(tasks: set[asyncio.Task[Any]], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for ``tasks``; cancel and reap whatever is still running."""
    if tasks:
        await asyncio.wait(set(tasks), timeout=timeout_s)
    for task in list(tasks):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def every(
    interval_s: float,
    shutdown: asyncio.Event,
    step: Callable[[], Awaitable[object]],
    *,
    log: logging.Logger,
    what: str,
) -> None:
    """Run ``step`` every ``interval_s`` until ``shutdown`` (the first after one interval); a
    failure is logged as ``what`` and the step tried again at the next interval."""
    while not shutdown.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(shutdown.wait(), timeout=interval_s)
        if shutdown.is_set():
            return
        try:
            await step()
        except Exception:
            log.exception("%s failed; trying again next interval", what)
