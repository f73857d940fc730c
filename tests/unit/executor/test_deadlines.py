"""A wait's default action at its deadline, decided from the fold: nothing before it, the
configured action after it, and nothing once a person answered (or another sweeper acted)."""

from __future__ import annotations

from longhaul.core.memory import MemoryStore
from longhaul.core.repository import traces
from longhaul.domain import events as ev
from longhaul.domain.messages import ToolCall
from longhaul.executor.deadlines import WaitDeadlines, overdue

from tests.support.folds import trace_state

CALLS = [ToolCall.of("c_1", "bash", '{"command": "rm x"}'), ToolCall.of("c_2", "bash")]


async def waiting(store: MemoryStore, trace_id: str, wait: ev.Waiting) -> None:
    created = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="go")])
    asked = ev.MessageAppended(
        sequence=2, parent_sequence=1, role="assistant", content="", tool_calls=CALLS
    )
    await traces(store).create(trace_id, created, actor="gateway")
    state = await trace_state(store, trace_id)
    await traces(store).save(trace_id, state, lambda _: [asked, wait], actor="executor")


async def test_an_overdue_approval_is_denied_once_by_the_deadline() -> None:
    store = MemoryStore()
    await waiting(
        store,
        "t_a",
        ev.Waiting(
            reason="approval", pending_calls=["c_1", "c_2"], deadline=100.0, on_deadline="deny"
        ),
    )
    state = await trace_state(store, "t_a")
    assert overdue(state, now=99.0) == []
    deadlines = WaitDeadlines(traces(store), actor="executor:x")
    assert await deadlines.take("t_a") is True
    assert await deadlines.take("t_a") is False  # a second sweeper finds nothing to do
    state = await trace_state(store, "t_a")
    assert state.status == "running"
    decided = list(state.tool_decisions.values())
    assert [(d.tool_call_id, d.approved, d.by) for d in decided] == [
        ("c_1", False, "deadline"),
        ("c_2", False, "deadline"),
    ]


async def test_an_overdue_question_is_answered_or_the_run_stopped() -> None:
    store = MemoryStore()
    await waiting(
        store, "t_q", ev.Waiting(reason="human", detail="?", deadline=1.0, on_deadline="deny")
    )
    await waiting(
        store, "t_s", ev.Waiting(reason="human", detail="?", deadline=1.0, on_deadline="stop")
    )
    [reply] = overdue(await trace_state(store, "t_q"), now=2.0)
    assert isinstance(reply, ev.HumanReplied) and reply.by == "deadline"
    [stop] = overdue(await trace_state(store, "t_s"), now=2.0)
    assert isinstance(stop, ev.StopRequested) and stop.reason == "wait_deadline"
    untimed = MemoryStore()
    await waiting(untimed, "t_u", ev.Waiting(reason="human", detail="?"))
    assert overdue(await trace_state(untimed, "t_u"), now=1e12) == []
