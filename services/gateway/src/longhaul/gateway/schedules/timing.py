"""When a schedule's ticks fall: pure arithmetic over milliseconds since the epoch.

A tick is identified by its time in whole milliseconds; the run a tick starts is derived from
it (``starting.derived_run_id``), so the same tick computed twice — by two gateways, or by one
before and after a ``kill -9`` — names the same run.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

MIN_EVERY_S = 1.0


class Timing:
    """One of ``cron`` (5 fields, in ``timezone``), ``every_s`` (from ``anchor_ms``) or ``at``."""

    def __init__(
        self,
        *,
        cron: str | None = None,
        timezone: str = "UTC",
        every_s: float | None = None,
        at: str | None = None,
        anchor_ms: int = 0,
    ) -> None:
        given = [
            name
            for name, value in (("cron", cron), ("every_s", every_s), ("at", at))
            if value is not None
        ]
        if len(given) != 1:
            raise ValueError("give exactly one of cron, every_s or at")
        self.cron = cron
        self.every_ms = round(every_s * 1000) if every_s else None
        self.at_ms = parse_rfc3339(at) if at else None
        self.anchor_ms = anchor_ms
        self.zone = zone(timezone)
        if cron is not None:
            check_cron(cron)
        if every_s is not None and every_s < MIN_EVERY_S:
            raise ValueError(f"every_s must be at least {MIN_EVERY_S:g}")

    def first_after(self, ms: int) -> int | None:
        """The first tick strictly after ``ms`` (``None``: no more ticks)."""
        if self.every_ms is not None:
            k = max(0, (ms - self.anchor_ms) // self.every_ms + 1)
            return self.anchor_ms + k * self.every_ms
        if self.at_ms is not None:
            return self.at_ms if self.at_ms > ms else None
        assert self.cron is not None
        start = datetime.fromtimestamp(ms / 1000, self.zone)
        try:
            return _ms(next(CronSim(self.cron, start)))
        except StopIteration:  # no match within 50 years
            return None

    def due(self, cursor: int, now: int, limit: int) -> list[int]:
        """The ticks in ``[cursor, now]``, oldest first, at most the latest ``limit``."""
        if cursor > now:
            return []
        if self.every_ms is not None:
            first = -(-(cursor - self.anchor_ms) // self.every_ms)
            last = (now - self.anchor_ms) // self.every_ms
            ks = range(max(first, last - limit + 1, 0), last + 1)
            return [self.anchor_ms + k * self.every_ms for k in ks]
        if self.at_ms is not None:
            return [self.at_ms] if cursor <= self.at_ms <= now else []
        assert self.cron is not None
        found: list[int] = []
        # reverse iteration yields ticks strictly before its start: a second past now
        for moment in CronSim(
            self.cron, datetime.fromtimestamp(now / 1000 + 1, self.zone), reverse=True
        ):
            tick = _ms(moment)
            if tick < cursor or len(found) == limit:
                break
            found.append(tick)
        return found[::-1]


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError) as exc:  # ZoneInfoNotFoundError is a KeyError
        raise ValueError(f"unknown timezone {name!r}") from exc


def check_cron(expression: str) -> None:
    """Five fields (minute hour day month weekday) that cronsim accepts."""
    if len(expression.split()) != 5:
        raise ValueError("cron takes 5 fields: minute hour day-of-month month day-of-week")
    try:
        CronSim(expression, datetime.now(UTC))
    except CronSimError as exc:
        raise ValueError(f"invalid cron expression: {exc}") from None


def parse_rfc3339(text: str) -> int:
    """An RFC 3339 time with its offset (``Z`` or ``±hh:mm``) in epoch milliseconds."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"at is not an RFC 3339 time: {text!r}") from exc
    if moment.tzinfo is None:
        raise ValueError("at needs a time zone offset (Z or ±hh:mm)")
    return _ms(moment)


def rfc3339(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)
