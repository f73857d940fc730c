"""Faults: events in a log that no fold could apply, kept as records instead of breaking reads.

Every write is checked against the fold first, so a fault means a bug, a version skew or a
hostile writer. Readers must not be held hostage by it: a fault is recorded on the state (GET
shows it, the gateway counts it), the event is skipped, and the aggregate goes on. The fold's
``version`` still counts the skipped event, so the next append's number never repeats one the
log already holds (a repeated ``Nats-Msg-Id`` would be dropped as a duplicate).
"""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.events import Unreadable

MAX_FAULTS = 50
"""Kept per aggregate (the latest): enough to diagnose, bounded against a flood."""


class Fault(msgspec.Struct, kw_only=True, omit_defaults=True):
    stream_seq: int = 0
    """Where it is in the stream (0 when the read did not say)."""
    type: str = ""
    """The event type when it decoded; empty for bytes that are not an event."""
    n: int = 0
    error: str
    ts: float = 0.0


def fault_of(item: ev.Event | Unreadable, error: Exception | None, stream_seq: int = 0) -> Fault:
    if isinstance(item, Unreadable):
        return Fault(stream_seq=item.stream_seq or stream_seq, error=item.error)
    return Fault(
        stream_seq=stream_seq,
        type=item.type,
        n=item.n,
        error=f"{type(error).__name__}: {error}",
        ts=item.ts,
    )


def next_version(version: int, fault: Fault) -> int:
    return fault.n if fault.n > version else version + 1
