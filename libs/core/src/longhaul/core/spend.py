"""The ``lh_spend`` bucket: every key's spend per UTC day (``longhaul.domain.spend``).

Executors count a trace's usage into it by compare-and-set before each model call and when a
turn ends, and ask it whether the key is at a limit; the gateway reads it for ``/api/usage``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.core.kvscan import current_entries
from longhaul.domain import spend
from longhaul.domain.config import SpendLimitsConfig
from longhaul.domain.state import Message, TraceState
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

log = logging.getLogger(__name__)

ATTEMPTS = 20
"""Compare-and-set rounds for one entry (every running trace of a key writes it)."""


class SpendLedger:
    def __init__(
        self,
        conn: Connection,
        limits: SpendLimitsConfig,
        *,
        clock: Callable[[], float] = time.time,
        on_counted: Callable[[Sequence[Message], str], None] | None = None,
    ) -> None:
        self.conn = conn
        self.limits = limits
        self.clock = clock
        self.on_counted = on_counted
        """Told of the messages (and their preset) each write counted: exactly once across
        the deployment, since only the write that adds them succeeds (the cost counters)."""

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.spend)

    async def count(self, state: TraceState) -> None:
        """Bring the key's day entries up to date with ``state``'s charged messages."""
        kv = await self._kv()
        preset = state.config.preset
        for key, messages in spend.by_day(state, self.clock()).items():
            await self._count(kv, key, state.trace_id, preset, messages)

    async def _count(
        self, kv: KeyValue, key: str, trace_id: str, preset: str, messages: list[Message]
    ) -> None:
        for _ in range(ATTEMPTS):
            entry = await get_entry(kv, key)
            day = spend.decode(entry.value if entry else None)
            fresh = day.count(trace_id, preset, messages)
            if not fresh:
                return
            try:
                if entry is None:
                    await kv.create(key, spend.encode(day))
                else:
                    await kv.update(key, spend.encode(day), last=entry.revision)
            except KeyWrongLastSequenceError:
                continue
            if self.on_counted is not None:
                self.on_counted(fresh, preset)
            return
        raise RuntimeError(f"spend entry {key} kept changing: not counted this time")

    async def reached(self, state: TraceState) -> str | None:
        """Count ``state``, then what its key is told at a limit (``None``: under them all).
        A run's raised allowance (``budget_answered``) is added to each limit."""
        await self.count(state)  # kept for /api/usage whether or not a limit applies
        limits = self.limits.of(state.owner or "local")
        if limits.day is None and limits.month is None:
            return None
        owner, today = state.owner or "local", spend.day_of(self.clock())
        kv = await self._kv()
        month = spend.Row()
        day = spend.Row()
        today_key = spend.entry_key(owner, today)
        entries = await current_entries(kv, spend.month_pattern(owner, today))
        for entry in entries:
            total = spend.decode(entry.value).total()
            month.add(total)
            if entry.key == today_key:
                day = total
        raised = state.usage.raised
        return spend.limit_reached(limits, day, month, raised.tokens, raised.cost)


async def entries(
    conn: Connection, owner: str | None, since: str | None
) -> list[tuple[str, str, spend.DayEntry]]:
    """``(owner, YYYY-MM-DD, entry)`` of ``owner``'s days (every key's with ``None``) from
    ``since`` (``YYYY-MM-DD``) on, oldest first."""
    kv = await conn.kv(conn.names.spend)
    found = await current_entries(kv, f"{owner}.>" if owner else ">")
    out: list[tuple[str, str, spend.DayEntry]] = []
    for entry in found:
        split = spend.split_key(entry.key)
        if split is None or (since is not None and split[1] < since):
            continue
        out.append((split[0], split[1], spend.decode(entry.value)))
    return sorted(out, key=lambda item: (item[1], item[0]))
