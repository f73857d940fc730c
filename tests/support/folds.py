"""Reading a fold in a test: through a repository, as every service does (full replay, no
snapshot, so what a test sees is the log itself)."""

from __future__ import annotations

from longhaul.core.eventlog import EventLog
from longhaul.core.repository import Repository
from longhaul.domain.state import TaskState, TraceState


async def trace_state(log: EventLog, trace_id: str) -> TraceState:
    return await Repository(log, "trace", TraceState).load(trace_id)


async def task_state(log: EventLog, task_id: str) -> TaskState:
    return await Repository(log, "task", TaskState).load(task_id)
