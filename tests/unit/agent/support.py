"""Test support: an in-memory sink that applies events with the pure fold, state builders,
an in-memory workspace. Nothing here imitates NATS or HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from longhaul.agent.tools import ToolContext, ToolSettings
from longhaul.core import events as ev
from longhaul.core.state import TraceState


class MemorySink:
    """The executor's sink without the log: applies each event to the turn's state."""

    def __init__(self, state: TraceState) -> None:
        self.state = state
        self.events: list[ev.TraceEvent] = []
        self.batches: list[list[ev.TraceEvent]] = []

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        self.batches.append(list(events))
        for event in events:
            event.aggregate_id = event.aggregate_id or self.state.trace_id
            self.state.apply(event)
            self.events.append(event)

    def of_type(self, kind: type[ev.TraceEvent]) -> list[Any]:
        return [event for event in self.events if isinstance(event, kind)]


class MemoryWorkspace:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, key: str) -> bytes | None:
        return self.data.get(key)

    async def put(self, key: str, value: bytes) -> None:
        self.data[key] = value


def new_state(
    *messages: ev.InputMessage | str,
    trace_id: str = "t_test",
    config: ev.TraceConfig | None = None,
) -> TraceState:
    """A created trace whose first messages are ``messages`` (strings are user messages)."""
    inputs = [
        ev.InputMessage(role="user", content=m) if isinstance(m, str) else m for m in messages
    ]
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id=trace_id,
            messages=inputs or [ev.InputMessage(role="user", content="do the task")],
            config=config or ev.TraceConfig(),
        )
    )
    return state


def tool_context(
    working_dir: Path,
    *,
    state: TraceState | None = None,
    settings: ToolSettings | None = None,
    tool_call_id: str = "call_1",
    **extra: Any,
) -> ToolContext:
    trace = state or new_state()
    return ToolContext(
        trace_id=trace.trace_id,
        tool_call_id=tool_call_id,
        working_dir=working_dir,
        state=trace,
        settings=settings or ToolSettings(),
        **extra,
    )
