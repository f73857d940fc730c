"""What became of step traces, read from their logs: whether they ended, which task they
belong to, and a finished trace's answer or error."""

from __future__ import annotations

from dataclasses import dataclass

from longhaul.core.repository import Recorded, Repository
from longhaul.domain import events as ev
from longhaul.domain.messages import content_text
from longhaul.domain.state import TraceState

FINAL_EVENTS = {"completed": "completed", "failed": "failed", "stopped": "stopped"}
TAIL_CHARS = 4000


async def trace_status(traces: Repository[TraceState], trace_id: str) -> str | None:
    """``None`` if the trace does not exist, its final status, or ``running`` (live)."""
    event_type = await traces.last_type(trace_id)
    if event_type is None:
        return None
    return FINAL_EVENTS.get(event_type, "running")


async def task_id_of_trace(traces: Repository[TraceState], trace_id: str) -> str | None:
    """The task a trace runs a phase of (from its ``trace_created``), if any."""
    first = await traces.first(trace_id)
    created = first.event if isinstance(first, Recorded) else None
    return created.task_id if isinstance(created, ev.TraceCreated) else None


@dataclass(frozen=True)
class StepOutcome:
    trace_id: str
    status: str
    output: str = ""
    error: str = ""
    transcript_tail: str = ""


async def step_outcome(traces: Repository[TraceState], trace_id: str) -> StepOutcome:
    """A final trace's result: its last assistant answer, or why it did not finish."""
    state = await traces.load(trace_id)
    path = state.main_path()
    answers = [m for m in path if m.role == "assistant" and not m.tool_calls]
    output = content_text(answers[-1].content) if answers else (state.summary or "")
    error = state.error or (f"stopped: {state.stop_reason}" if state.status == "stopped" else "")
    tail = "\n".join(f"[{m.role}] {content_text(m.content)}" for m in path[-6:])[-TAIL_CHARS:]
    return StepOutcome(trace_id, state.status or "running", output, error, tail)
