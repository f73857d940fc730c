"""The durable pull consumer on the trace events that wake an executor.

All replicas bind to one durable per namespace and compete for its messages. A delivered
message is only a wake-up: handlers never trust its payload, they re-read the trace
(docs/ARCHITECTURE.md §4).
"""

from __future__ import annotations

from dataclasses import dataclass

from longhaul.domain.names import Names
from nats.js import JetStreamContext, api

RUN_TYPES = (
    "trace_created",
    "run_requested",
    "human_replied",
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


@dataclass(frozen=True)
class Wakeup:
    trace_id: str
    event_type: str


def parse_wakeup(names: Names, subject: str) -> Wakeup | None:
    """The trace and event type a subject names, or None for anything unexpected."""
    try:
        aggregate, aggregate_id, event_type = names.parse_subject(subject)
    except IndexError:
        return None
    if aggregate != "trace" or event_type not in WAKE_TYPES or not aggregate_id:
        return None
    return Wakeup(aggregate_id, event_type)


def consumer_config(
    names: Names, durable: str, *, ack_wait_s: float, max_deliver: int, max_ack_pending: int
) -> api.ConsumerConfig:
    return api.ConsumerConfig(
        name=durable,
        durable_name=durable,
        description="longhaul executors: trace wake-ups",
        deliver_policy=api.DeliverPolicy.ALL,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=ack_wait_s,
        max_deliver=max_deliver,
        max_ack_pending=max_ack_pending,
        filter_subjects=[names.type_filter("trace", t) for t in WAKE_TYPES],
    )


async def subscribe(
    js: JetStreamContext, names: Names, config: api.ConsumerConfig
) -> JetStreamContext.PullSubscription:
    """Create (or update) the shared durable and bind a pull subscription to it."""
    await js.add_consumer(names.stream, config)
    assert config.durable_name is not None
    return await js.pull_subscribe_bind(
        durable=config.durable_name,
        stream=names.stream,
        pending_msgs_limit=-1,
        pending_bytes_limit=-1,
    )
