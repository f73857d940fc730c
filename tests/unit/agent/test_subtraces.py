"""agent/evaluate spawn children and wait; SubagentLimit keeps 3 agent calls per turn; when
the children finished, the next turn appends their summaries as the tool result."""

from __future__ import annotations

from pathlib import Path

from longhaul.domain import events as ev
from longhaul.domain.events import TraceStatus
from longhaul.domain.state import TraceState

from tests.unit.agent.support import AgentRun, answer, assert_tool_pairs_complete, call, calls


def finish_children(state: TraceState, status: TraceStatus = "completed") -> None:
    for child in list(state.subtraces):
        state.apply(
            ev.SubtraceFinished(
                aggregate_id=state.trace_id,
                child_trace_id=child,
                status=status,
                summary=f"summary of {child}",
            )
        )


async def test_five_agent_calls_keep_three(tmp_path: Path) -> None:
    five = calls(*(call("agent", {"task": f"task {i}"}, id=f"a{i}") for i in range(5)))
    run = AgentRun(tmp_path)
    outcome = await run.turn(five)
    state, sink = run.state, run.sink

    spawned = sink.of_type(ev.SubtraceSpawned)
    assert [s.tool_call_id for s in spawned] == ["a0", "a1", "a2"]
    assert all(s.child_trace_id.startswith("t_") for s in spawned)
    assert len({s.child_trace_id for s in spawned}) == 3
    dropped = [m for m in sink.of_type(ev.MessageAppended) if m.error_code == "subagent_limit"]
    assert [m.tool_call_id for m in dropped] == ["a3", "a4"]
    assert "at most 3 agent calls" in str(dropped[0].content)
    waiting = sink.of_type(ev.Waiting)
    assert outcome.end == "waiting" and len(waiting) == 1 and waiting[0].reason == "subtraces"
    assert state.status == "waiting" and state.wait_reason == "subtraces"


async def test_children_summaries_become_the_tool_result(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    outcome = await run.turn(
        calls(
            call("agent", {"mode": "explore", "tasks": ["where is x", "where is y"]}, id="e1"),
            call("agent", {"task": "build it", "preset": "analyst"}, id="d1"),
        )
    )
    assert outcome.end == "waiting"
    spawned = run.sink.of_type(ev.SubtraceSpawned)
    assert [(s.tool_call_id, s.mode, s.preset) for s in spawned] == [
        ("e1", "explore", "explore"),
        ("e1", "explore", "explore"),
        ("d1", "delegate", "analyst"),
    ]
    # Nothing to do while a child runs: a turn on a waiting trace is a no-op.
    assert (await run.turn()).end == "waiting"
    assert run.script.requests == []

    finish_children(run.state)
    assert run.state.status == "running"
    outcome = await run.turn(answer("all done"))
    assert outcome.end == "completed"
    request = run.script.requests[0].messages
    assert_tool_pairs_complete(request)
    results = {m["tool_call_id"]: m["content"] for m in request if m["role"] == "tool"}
    explore_ids = [s.child_trace_id for s in spawned[:2]]
    assert all(f"summary of {child}" in results["e1"] for child in explore_ids)
    assert f"summary of {spawned[2].child_trace_id}" in results["d1"]


async def test_a_child_still_running_means_waiting_again(tmp_path: Path) -> None:
    """Crash after the spawns but before Waiting: the next turn waits instead of healing."""
    run = AgentRun(tmp_path)
    state = run.state
    await run.sink.emit(
        [
            ev.MessageAppended(
                sequence=2,
                parent_sequence=1,
                role="assistant",
                tool_calls=[ev.ToolCall.of(id="d1", name="agent")],
            ),
            ev.SubtraceSpawned(child_trace_id="t_child", tool_call_id="d1", task="x"),
        ]
    )
    outcome = await run.turn()
    assert outcome.end == "waiting" and state.wait_reason == "subtraces"
    assert run.script.requests == [] and state.unanswered_tool_calls()


async def test_failed_children_are_reported_as_a_failed_result(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(calls(call("agent", {"task": "x"}, id="d1")))
    finish_children(run.state, status="failed")
    await run.turn(answer("gave up"))
    result = next(m for m in run.sink.of_type(ev.MessageAppended) if m.tool_call_id == "d1")
    assert result.error_code == "subtrace_failed" and "(delegate, failed)" in str(result.content)


async def test_continue_from_reuses_a_finished_child(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(calls(call("agent", {"task": "x"}, id="d1")))
    child = next(iter(run.state.subtraces))
    finish_children(run.state)
    await run.turn(calls(call("agent", {"task": "more", "continue_from": child}, id="d2")))
    again = run.sink.of_type(ev.SubtraceSpawned)[-1]
    assert again.child_trace_id == child and again.continue_from == child


async def test_evaluate_spawns_an_evaluator(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    await run.turn(
        calls(call("evaluate", {"subject": "the answer", "criteria": ["is correct"]}, id="v1"))
    )
    [spawned] = run.sink.of_type(ev.SubtraceSpawned)
    assert spawned.mode == "evaluate" and "- is correct" in spawned.task


async def test_mixed_waits_in_one_turn_are_refused(tmp_path: Path) -> None:
    run = AgentRun(tmp_path)
    outcome = await run.turn(
        calls(
            call("agent", {"task": "x"}, id="d1"),
            call("ask_human", {"question": "ok?"}, id="h1"),
            call("glob", {"pattern": "*"}, id="g1"),
        )
    )
    tool_messages = [m for m in run.sink.of_type(ev.MessageAppended) if m.role == "tool"]
    messages = {m.tool_call_id: m for m in tool_messages}
    assert messages["h1"].error_code == "deferred_conflict"
    assert messages["g1"].error_code is None
    assert outcome.end == "waiting" and run.state.wait_reason == "subtraces"
