"""A key's spend per UTC day and month (``spend_limits``), counted from the log's usage.

Every message with usage (a model call's assistant message) is counted once into the entry of
its key and UTC day, ``<key id>.<YYYY-MM>.<DD>`` in the ``lh_spend`` bucket: rows by model and
preset (tokens, dollars, calls) and, per trace, the last message sequence counted (``seen``).
Entry and mark change together by compare-and-set, so counting is idempotent: an executor that
counts a trace again (after a crash, on another executor) adds only what the entry has not
seen. Days and months begin at 00:00 UTC.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec
from longhaul.domain.budget import over_budget
from longhaul.domain.config import KeyLimits, PeriodLimit
from longhaul.domain.state import Message, TraceState

ROW_SEPARATOR = "\t"


class Row(msgspec.Struct, kw_only=True):
    tokens: int = 0
    usd: float = 0.0
    calls: int = 0

    def add(self, other: Row) -> None:
        self.tokens += other.tokens
        self.usd += other.usd
        self.calls += other.calls


class DayEntry(msgspec.Struct, kw_only=True):
    """One key's spend on one UTC day."""

    rows: dict[str, Row] = msgspec.field(default_factory=dict)
    """``<model>\\t<preset>`` → what calls of that model under that preset spent."""
    seen: dict[str, int] = msgspec.field(default_factory=dict)
    """Trace id → the last message sequence counted here."""

    def total(self) -> Row:
        out = Row()
        for row in self.rows.values():
            out.add(row)
        return out

    def count(self, trace_id: str, preset: str, messages: Iterable[Message]) -> list[Message]:
        """Add ``messages`` this entry has not seen; returns those."""
        mark = self.seen.get(trace_id, -1)
        fresh = [m for m in messages if m.sequence > mark]
        if not fresh:
            return []
        for message in fresh:
            key = f"{message.model or 'unknown'}{ROW_SEPARATOR}{preset}"
            row = self.rows.setdefault(key, Row())
            row.tokens += tokens_of(message)
            row.usd += message.cost
            row.calls += 1
        self.seen[trace_id] = max(m.sequence for m in fresh)
        return fresh


def tokens_of(message: Message) -> int:
    usage = message.usage
    return usage.prompt_tokens + usage.completion_tokens if usage else 0


def day_of(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def entry_key(owner: str, day: datetime) -> str:
    return f"{owner}.{day:%Y-%m}.{day:%d}"


def month_pattern(owner: str, day: datetime) -> str:
    return f"{owner}.{day:%Y-%m}.*"


def split_key(key: str) -> tuple[str, str] | None:
    """``(owner, YYYY-MM-DD)`` of an entry key, or ``None`` for another key."""
    parts = key.split(".")
    if len(parts) != 3:
        return None
    return parts[0], f"{parts[1]}-{parts[2]}"


def by_day(state: TraceState, now: float, after: int = -1) -> dict[str, list[Message]]:
    """The trace's charged messages of today and yesterday (UTC) past sequence ``after`` (known
    to be counted), by entry key, oldest first: what a count brings up to date (an older one a
    crash left uncounted stays so). Read from the newest back, so a long trace costs what is
    new."""
    owner = state.owner or "local"
    oldest = _day_number(now) - 1
    by_number: dict[int, list[Message]] = {}
    for message in reversed(state.messages.values()):  # appended in sequence order
        if message.sequence <= after:
            break
        if message.usage is None and not message.cost:
            continue
        number = _day_number(message.ts)
        if number < oldest:
            break
        by_number.setdefault(number, []).append(message)
    return {
        entry_key(owner, day_of(number * SECONDS_A_DAY)): messages[::-1]
        for number, messages in by_number.items()
    }


SECONDS_A_DAY = 86_400


def _day_number(ts: float) -> int:
    """Days since the epoch of ``ts``'s UTC day (POSIX time has no leap seconds): a day's
    key is formatted once a count, not once a message."""
    return int(ts // SECONDS_A_DAY)


def limit_reached(
    limits: KeyLimits, day: Row, month: Row, extra_tokens: int, extra_cost: float
) -> str | None:
    """What a key at one of its limits is told (spent and limit), or ``None``."""
    periods: list[tuple[str, PeriodLimit | None, Row]] = [
        ("day", limits.day, day),
        ("month", limits.month, month),
    ]
    for period, limit, spent in periods:
        if limit is None:
            continue
        cap = over_budget(
            limit, spent.tokens, spent.usd, extra_tokens=extra_tokens, extra_cost=extra_cost
        )
        if cap == "max_tokens":
            return (
                f"the key's {period} limit (UTC) is reached: {spent.tokens} tokens spent of "
                f"{limit.tokens}{_raised(extra_tokens)}"
            )
        if cap == "max_cost":
            return (
                f"the key's {period} limit (UTC) is reached: ${spent.usd:.4f} spent of "
                f"${limit.usd}{_raised(extra_cost, '$')}"
            )
    return None


def _raised(extra: float, unit: str = "") -> str:
    return f" (+{unit}{extra} raised for this run)" if extra else ""


def decode(data: bytes | None) -> DayEntry:
    if not data:
        return DayEntry()
    return msgspec.json.decode(data, type=DayEntry)


def encode(entry: DayEntry) -> bytes:
    return msgspec.json.encode(entry)
