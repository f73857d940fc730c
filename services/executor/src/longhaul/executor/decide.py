"""What a wake-up leads to, decided from the folded state alone (never from the event that
woke us), so redelivered and duplicated wake-ups are harmless."""

from __future__ import annotations

from enum import Enum

from longhaul.domain.state import TraceState


class Action(Enum):
    NOTHING = "nothing"
    """Unknown, final, or waiting on something that has not answered yet."""
    STOP = "stop"
    """A stop was requested and nobody runs the trace: record ``Stopped`` directly."""
    RUN = "run"
    """The trace is running and needs a turn."""


def decide(state: TraceState) -> Action:
    if not state.exists or state.is_final:
        return Action.NOTHING
    if state.stop_requested:
        return Action.STOP
    if state.status == "running":
        return Action.RUN
    return Action.NOTHING
