"""What became of step traces, read from their logs: whether they ended, which task they
belong to, and a finished trace's answer or error."""

from __future__ import annotations

from dataclasses import dataclass

from longhaul.core.connection import Connection
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.messages import content_text
from longhaul.domain.state import TraceState
from nats.js.errors import NotFoundError

FINAL_EVENTS = {"completed": "completed", "failed": "failed", "stopped": "stopped"}
TAIL_CHARS = 4000


async def trace_status(conn: Connection, trace_id: str) -> str | None:
    """``None`` if the trace does not exist, its final status, or ``running`` (live)."""
    try:
        last = await conn.js.get_last_msg(
            conn.names.stream, conn.names.aggregate_filter("trace", trace_id)
        )
    except NotFoundError:
        return None
    event_type = (last.subject or "").rsplit(".", 1)[-1]
    return FINAL_EVENTS.get(event_type, "running")


async def task_id_of_trace(conn: Connection, trace_id: str) -> str | None:
    """The task a trace runs a phase of (from its ``trace_created``), if any."""
    try:
        first = await conn.js.get_last_msg(
            conn.names.stream, conn.names.subject("trace", trace_id, "trace_created")
        )
    except NotFoundError:
        return None
    try:
        created = ev.decode(first.data or b"")
    except ev.EventDecodeError:
        return None
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
