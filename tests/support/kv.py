"""Waiting on a KV bucket's entries as they are written (a watch, never polling)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from longhaul.core.connection import Connection


async def kv_until(
    conn: Connection, bucket: str, pattern: str, holds: Callable[[bytes], bool], *, within: float
) -> None:
    """Return once an entry of ``bucket`` under ``pattern`` has a value that ``holds``;
    TimeoutError after ``within`` seconds."""
    kv = await conn.kv(bucket)
    watcher = await kv.watch(pattern)
    try:
        async with asyncio.timeout(within):
            while True:
                entry = await watcher.updates(timeout=within)
                if entry is not None and entry.value and holds(entry.value):
                    return
    finally:
        await watcher.stop()
