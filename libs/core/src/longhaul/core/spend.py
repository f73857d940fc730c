"""The ``lh_spend`` bucket: every key's spend per UTC day (``longhaul.domain.spend``).

Executors count a trace's usage into it by compare-and-set before each model call and when a
turn ends, and ask it whether the key is at a limit; the gateway reads it for ``/api/usage``.
"""

from __future__ import annotations

import asyncio
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

ATTEMPTS = 20
"""Compare-and-set rounds for one entry (every running trace of a key writes it)."""


UNLIMITED_COUNT_EVERY_S = 10.0
"""A key without limits has a running trace counted this often before model calls, the first
this long into a turn (and always when a turn ends): ``/api/usage`` lags by that much, a step
pays no KV round trip. A key with a limit is counted before every call, which the bound
needs."""
CACHED_ENTRIES = 1024
"""Day entries whose last write this process remembers (revision and value)."""
PAST_DAYS_TTL_S = 60.0
"""How long the sum of a month's other days is reused (only a late count after a crash
changes a past day)."""


class SpendLedger:
    def __init__(
        self,
        conn: Connection,
        limits: SpendLimitsConfig,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        on_counted: Callable[[Sequence[Message], str], None] | None = None,
    ) -> None:
        self.conn = conn
        self.limits = limits
        self.clock = clock
        self.monotonic = monotonic
        self.on_counted = on_counted
        """Told of the messages (and their preset) each write counted: exactly once across
        the deployment, since only the write that adds them succeeds (the cost counters)."""
        self._marks: dict[str, int] = {}
        """Trace id → the last message sequence this process saw counted: a count looks only
        past it (the entries' own marks decide what is added)."""
        self._written: dict[str, tuple[int, bytes]] = {}
        """Entry key → the revision and value this process last wrote or read: the next count
        writes on it straight away (one round trip), a lost race reads it again."""
        self._counted_at: dict[str, float] = {}
        """Trace id → when it was last counted (a running trace of a key without limits)."""
        self._past: dict[str, tuple[float, spend.Row]] = {}
        """``<owner>.<YYYY-MM>.<DD>`` of today → (when read, the month's other days' total)."""
        self._writing: dict[str, tuple[asyncio.Lock, int]] = {}
        """Entry key → a lock and how many counts hold or wait for it: this process's counts
        of one entry go one at a time, each written on the last one's revision (one round
        trip), instead of racing each other's compare-and-set (every trace of a key ending
        its turn at once would lose round after round)."""

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.spend)

    async def count(self, state: TraceState) -> None:
        """Bring the key's day entries up to date with ``state``'s charged messages (a turn's
        end: the trace is forgotten until its next turn)."""
        await self._count_all(state)
        self._marks.pop(state.trace_id, None)

    async def _count_all(self, state: TraceState) -> dict[str, spend.DayEntry]:
        """:meth:`count`, returning the entries as written (or read, when nothing was new)."""
        self._counted_at.pop(state.trace_id, None)
        kv = await self._kv()
        preset, trace_id = state.config.preset, state.trace_id
        days = spend.by_day(state, self.clock(), self._marks.get(trace_id, -1))
        counted = {
            key: await self._count(kv, key, trace_id, preset, messages)
            for key, messages in days.items()
        }
        if days:
            self._marks[trace_id] = max(m[-1].sequence for m in days.values())
        return counted

    async def _count(
        self, kv: KeyValue, key: str, trace_id: str, preset: str, messages: list[Message]
    ) -> spend.DayEntry:
        lock, users = self._writing.get(key) or (asyncio.Lock(), 0)
        self._writing[key] = (lock, users + 1)
        try:
            async with lock:
                return await self._count_entry(kv, key, trace_id, preset, messages)
        finally:
            lock, users = self._writing[key]
            if users == 1:
                del self._writing[key]
            else:
                self._writing[key] = (lock, users - 1)

    async def _count_entry(
        self, kv: KeyValue, key: str, trace_id: str, preset: str, messages: list[Message]
    ) -> spend.DayEntry:
        known = self._written.pop(key, None)
        for _ in range(ATTEMPTS):
            remembered = known is not None
            if known is None:
                entry = await get_entry(kv, key)
                known = (entry.revision or 0, entry.value or b"") if entry else (0, b"")
            revision, value = known
            known = None
            day = spend.decode(value)
            fresh = day.count(trace_id, preset, messages)
            if not fresh:
                if remembered:
                    continue  # others may have written since: the figures are read afresh
                if revision:
                    self._remember(key, revision, value)
                return day
            encoded = spend.encode(day)
            try:
                if not revision:
                    revision = await kv.create(key, encoded)
                else:
                    revision = await kv.update(key, encoded, last=revision)
            except KeyWrongLastSequenceError:
                continue
            self._remember(key, revision, encoded)
            if self.on_counted is not None:
                self.on_counted(fresh, preset)
            return day
        raise RuntimeError(f"spend entry {key} kept changing: not counted this time")

    def _remember(self, key: str, revision: int, value: bytes) -> None:
        if len(self._written) >= CACHED_ENTRIES:
            self._written.clear()
        self._written[key] = (revision, value)

    async def reached(self, state: TraceState) -> str | None:
        """Count ``state``, then what its key is told at a limit (``None``: under them all).
        A run's raised allowance (``budget_answered``) is added to each limit."""
        owner = state.owner or "local"
        limits = self.limits.of(owner)
        if limits.day is None and limits.month is None:
            now = self.monotonic()
            last = self._counted_at.get(state.trace_id)
            if last is None:  # a turn's first call: earlier turns were counted as they ended
                self._counted_at[state.trace_id] = now
            elif now - last >= UNLIMITED_COUNT_EVERY_S:
                await self._count_all(state)
                self._counted_at[state.trace_id] = now
            return None
        counted = await self._count_all(state)
        today = spend.day_of(self.clock())
        today_key = spend.entry_key(owner, today)
        entry = counted.get(today_key)
        if entry is None:  # nothing of this trace's today yet: the day as others left it
            found = await get_entry(await self._kv(), today_key)
            entry = spend.decode(found.value if found else None)
        day = entry.total()
        month = spend.Row()
        month.add(day)
        month.add(await self._other_days(today_key, spend.month_pattern(owner, today)))
        raised = state.usage.raised
        return spend.limit_reached(limits, day, month, raised.tokens, raised.cost)

    async def _other_days(self, today_key: str, pattern: str) -> spend.Row:
        """The total of the month's days but today (``pattern``), reused briefly."""
        now = self.monotonic()
        cached = self._past.get(today_key)
        if cached is not None and now - cached[0] < PAST_DAYS_TTL_S:
            return cached[1]
        total = spend.Row()
        for found in await current_entries(await self._kv(), pattern):
            if found.key != today_key:
                total.add(spend.decode(found.value).total())
        self._past = {k: v for k, v in self._past.items() if now - v[0] < PAST_DAYS_TTL_S}
        self._past[today_key] = (now, total)
        return total


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


async def forget_traces(conn: Connection, owner: str, trace_ids: Sequence[str]) -> None:
    """Drop deleted traces' marks from their key's day entries: what they spent stays counted,
    their ids go (the bucket keeps one revision, so no older one still names them)."""
    gone = set(trace_ids)
    kv = await conn.kv(conn.names.spend)
    for found in await current_entries(kv, f"{owner}.>"):
        entry: KeyValue.Entry | None = found
        for _ in range(ATTEMPTS):
            if entry is None or entry.value is None:
                break
            day = spend.decode(entry.value)
            if not gone & day.seen.keys():
                break
            day.seen = {t: mark for t, mark in day.seen.items() if t not in gone}
            try:
                await kv.update(entry.key, spend.encode(day), last=entry.revision)
                break
            except KeyWrongLastSequenceError:  # an executor counted meanwhile
                entry = await get_entry(kv, found.key)
