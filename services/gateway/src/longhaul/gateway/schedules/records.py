"""What ``lh_schedules`` holds: a schedule with its cursor and runs, and a trigger.

Keys, all below the owner (``longhaul.core.experiences.owner_segment``), so a listing or an
erasure of one key never reaches another's: ``<owner>.sched.<schedule id>`` and
``<owner>.trig.<trigger id>``. A schedule is one entry, updated compare-and-set on its
revision by the API (PATCH) and by every gateway's ticker alike.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from longhaul.gateway.schedules.policy import CatchUp, Overlap
from longhaul.gateway.schedules.timing import Timing

RUNS_KEPT = 100
"""The latest runs a schedule lists (each run also names its schedule on its own log)."""


class Template(msgspec.Struct, kw_only=True):
    kind: Literal["trace", "task"]
    body: dict[str, Any]


class ScheduledRun(msgspec.Struct, kw_only=True, omit_defaults=True):
    run_id: str
    kind: Literal["trace", "task"]
    tick_ms: int
    started_at: float
    manual: bool = False


class ScheduleRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    schedule_id: str
    owner: str
    name: str
    template: Template
    created_at: float
    updated_at: float
    anchor_ms: int
    """Where ``every_s`` ticks count from (the creation, or the last change of the timing)."""
    cron: str | None = None
    timezone: str = "UTC"
    every_s: float | None = None
    at: str | None = None
    overlap: Overlap = "skip"
    catch_up: CatchUp = "none"
    paused: bool = False
    next_tick_ms: int | None = None
    """The first tick not handled yet: the ticker's cursor."""
    runs: list[ScheduledRun] = msgspec.field(default_factory=list)
    skipped: int = 0
    last_error: str = ""
    failures: int = 0
    """Ticks in a row that started nothing (0 again once one starts a run, or on resume)."""
    failure_code: str = ""
    """The last of those ticks' error code: a failure with another is news."""
    paused_reason: str = ""
    """Why the ticker paused it (empty: not paused, or paused by its key)."""

    def timing(self) -> Timing:
        return Timing(
            cron=self.cron,
            timezone=self.timezone,
            every_s=self.every_s,
            at=self.at,
            anchor_ms=self.anchor_ms,
        )

    def with_run(self, run: ScheduledRun) -> list[ScheduledRun]:
        """The runs list with ``run`` (once), the latest kept."""
        if any(known.run_id == run.run_id for known in self.runs):
            return self.runs
        return [*self.runs, run][-RUNS_KEPT:]


class TriggerRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    trigger_id: str
    owner: str
    name: str
    template: Template
    secret: str
    """The HMAC key: a signature can only be checked with it (shown once, at creation)."""
    created_at: float
