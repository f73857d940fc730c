"""The tasks of a key whose plan waits for review, without folding every task.

Tasks have no index; the stream's subject counts say enough: a task whose ``plan_created``
events outnumber its ``plan_reviewed`` ones and that has not ended may wait for review (four
``stream_info`` requests, no payloads). Only those few are folded, and kept if they belong to
the caller and are ``awaiting_review``.
"""

from __future__ import annotations

from longhaul.domain.state import TaskState
from longhaul.gateway.runtime import Runtime

_COUNTED = ("plan_created", "plan_reviewed", "task_completed", "task_failed")


async def _per_task(runtime: Runtime, event_type: str) -> dict[str, int]:
    conn = runtime.service.conn
    info = await conn.js.stream_info(
        conn.names.stream, subjects_filter=conn.names.type_filter("task", event_type)
    )
    return {subject.split(".")[-2]: n for subject, n in (info.state.subjects or {}).items()}


async def awaiting_review(runtime: Runtime, owner: str) -> list[TaskState]:
    """The caller's tasks in ``awaiting_review``."""
    async with runtime.nats_call():
        created, reviewed, completed, failed = [
            await _per_task(runtime, event_type) for event_type in _COUNTED
        ]
        found: list[TaskState] = []
        for task_id, plans in created.items():
            if plans <= reviewed.get(task_id, 0) or task_id in completed or task_id in failed:
                continue
            state = await runtime.tasks.load(task_id)
            if state.owner == owner and state.status == "awaiting_review":
                found.append(state)
    return found
