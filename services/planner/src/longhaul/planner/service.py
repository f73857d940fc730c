"""The planner's wake-ups: which events reach it and how they map to tasks.

It reacts to ``task_created``, ``plan_reviewed`` and ``resume_requested`` on tasks, and to
the final events (``completed``, ``failed``, ``stopped``) of traces; a trace that runs no task
phase is acknowledged and ignored. Work on one task is serialised inside a replica; replicas
share one durable consumer and settle races through the task log's optimistic concurrency.
"""

from __future__ import annotations

import logging

from longhaul.core.connection import Connection
from longhaul.core.consumer import ConsumerSpec, Delivery
from longhaul.core.keylocks import KeyLocks
from longhaul.domain.events import EventDecodeError
from longhaul.domain.state import InvalidTransition
from longhaul.planner.driver import TaskDriver

log = logging.getLogger(__name__)

DURABLE = "planner"
TASK_EVENTS = ("task_created", "plan_reviewed", "resume_requested")
TRACE_EVENTS = ("completed", "failed", "stopped")


def consumer_spec(conn: Connection, *, fetch_timeout_s: float = 1.0) -> ConsumerSpec:
    names = conn.names
    return ConsumerSpec(
        durable=DURABLE,
        subjects=[names.type_filter("task", t) for t in TASK_EVENTS]
        + [names.type_filter("trace", t) for t in TRACE_EVENTS],
        fetch_timeout_s=fetch_timeout_s,
    )


class Planner:
    def __init__(self, conn: Connection, driver: TaskDriver) -> None:
        self.conn = conn
        self.driver = driver
        self.locks = KeyLocks()

    async def handle(self, delivery: Delivery) -> None:
        ended = None
        if delivery.aggregate == "task":
            task_id: str | None = delivery.aggregate_id
        else:
            task_id = await self.driver.task_of_step(delivery.aggregate_id)
            ended = delivery.aggregate_id
        if task_id is None:
            return
        async with self.locks.hold(task_id):
            try:
                await self.driver.drive(task_id, ended=ended)
            except (EventDecodeError, InvalidTransition) as exc:
                # The task's log holds an event that cannot be folded; retrying cannot help.
                log.error("task %s cannot be driven: %s", task_id, exc)
