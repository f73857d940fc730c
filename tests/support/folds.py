"""Reading a fold in a test: through a repository, as every service does (full replay, no
snapshot, so what a test sees is the log itself); and a snapshot an older build wrote."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from longhaul.core.eventlog import EventLog
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.state import TaskState, TraceState


async def trace_state(log: EventLog, trace_id: str) -> TraceState:
    return await Repository(log, "trace", TraceState).load(trace_id)


async def task_state(log: EventLog, task_id: str) -> TaskState:
    return await Repository(log, "task", TaskState).load(task_id)


SHAPE_4_STORY = Path(__file__).parent / "data" / "trace_snapshot_v4.json"
"""A trace's events and the snapshot the fold of shape 4 (every field flat) took of them, at
stream sequences 1..n: what an older build left in ``lh_snapshots``."""


def shape_4_story() -> tuple[list[ev.Event], bytes]:
    data: dict[str, Any] = json.loads(SHAPE_4_STORY.read_text())
    assert data["schema"] == 4
    events = [ev.decode(json.dumps(item)) for item in data["events"]]
    return events, base64.b64decode(data["snapshot"])
