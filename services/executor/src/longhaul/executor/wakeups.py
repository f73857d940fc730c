"""The durable pull consumer on the trace events that wake an executor.

All replicas bind to one durable per namespace and compete for its messages. A delivered
message is only a wake-up: handlers never trust its payload, they re-read the trace
(docs/07-the-log.md).
"""

from __future__ import annotations

from longhaul.core.consumer import ConsumerSpec, Delivery
from longhaul.domain.names import Names
from longhaul.executor.settings import ExecutorSettings

RUN_TYPES = (
    "trace_created",
    "run_requested",
    "human_replied",
    "budget_answered",
    "tool_decided",
    "tool_results_posted",
    "verification_passed",
    "verification_failed",
    "stop_requested",
    "reflect_requested",
    "compact_requested",
    "subtrace_finished",
    "message_received",
)
"""Events after which the trace itself may have work to do."""

SPAWN_TYPES = ("subtrace_spawned",)
"""A parent asked for a child: create it (or queue it behind the concurrency limit)."""

FINAL_TYPES = ("completed", "failed", "stopped")
"""A trace ended: tell its parent, stop its children."""

WAKE_TYPES = RUN_TYPES + SPAWN_TYPES + FINAL_TYPES


def consumer_spec(names: Names, settings: ExecutorSettings) -> ConsumerSpec:
    """The executors' durable: one per namespace, every replica competing for it."""
    return ConsumerSpec(
        durable=settings.durable,
        subjects=[names.type_filter("trace", t) for t in WAKE_TYPES],
        description="longhaul executors: trace wake-ups",
        ack_wait_s=settings.ack_wait_s,
        max_deliver=settings.poison_attempts * 4,
        concurrency=settings.concurrency,
        max_ack_pending=max(1000, settings.concurrency * 64),
        grace_s=settings.shutdown_grace_s,
    )


def is_wakeup(delivery: Delivery) -> bool:
    """A trace event an executor reacts to (anything else is a forged or stray subject)."""
    return (
        delivery.aggregate == "trace"
        and delivery.event_type in WAKE_TYPES
        and bool(delivery.aggregate_id)
    )
