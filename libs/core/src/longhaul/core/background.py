"""Owned background tasks: wait for them a bounded time at the end, then cancel the rest."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def drain(tasks: set[asyncio.Task[Any]], timeout_s: float) -> None:
    """Wait up to ``timeout_s`` for ``tasks``; cancel and reap whatever is still running."""
    if tasks:
        await asyncio.wait(set(tasks), timeout=timeout_s)
    for task in list(tasks):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
