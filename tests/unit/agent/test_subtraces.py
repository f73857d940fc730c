"""agent/evaluate spawn children and wait; SubagentLimit keeps 3 agent calls per turn; when
the children finished, the next turn appends their summaries as the tool result."""

from __future__ import annotations

from pathlib import Path

from longhaul.core import events as ev
from longhaul.core.events import TraceStatus
from longhaul.core.state import TraceState

from tests.unit.agent.support import (
    MemorySink,
    answer,
    assert_tool_pairs_complete,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)


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
    model, _ = scripted(five)
    state = new_state()
    sink = MemorySink(state)
    outcome = await make_engine(tmp_path).run_turn(state, sink, model=model)

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
    engine = make_engine(tmp_path)
    model, _ = scripted(
        calls(
            call("agent", {"mode": "explore", "tasks": ["where is x", "where is y"]}, id="e1"),
            call("agent", {"task": "build it", "preset": "analyst"}, id="d1"),
        )
    )
    state = new_state()
    sink = MemorySink(state)
    assert (await engine.run_turn(state, sink, model=model)).end == "waiting"
    spawned = sink.of_type(ev.SubtraceSpawned)
    assert [(s.tool_call_id, s.mode, s.preset) for s in spawned] == [
        ("e1", "explore", "explore"),
        ("e1", "explore", "explore"),
        ("d1", "delegate", "analyst"),
    ]
    # Nothing to do while a child runs: a turn on a waiting trace is a no-op.
    idle, idle_script = scripted()
    assert (await engine.run_turn(state, sink, model=idle)).end == "waiting"
    assert idle_script.requests == []

    finish_children(state)
    assert state.status == "running"
    model2, script2 = scripted(answer("all done"))
    outcome = await engine.run_turn(state, sink, model=model2)
    assert outcome.end == "completed"
    request = script2.requests[0].messages
    assert_tool_pairs_complete(request)
    results = {m["tool_call_id"]: m["content"] for m in request if m["role"] == "tool"}
    explore_ids = [s.child_trace_id for s in spawned[:2]]
    assert all(f"summary of {child}" in results["e1"] for child in explore_ids)
    assert f"summary of {spawned[2].child_trace_id}" in results["d1"]


async def test_a_child_still_running_means_waiting_again(tmp_path: Path) -> None:
    """Crash after the spawns but before Waiting: the next turn waits instead of healing."""
    engine = make_engine(tmp_path)
    state = new_state()
    sink = MemorySink(state)
    await sink.emit(
        [
            ev.MessageAppended(
                sequence=2,
                parent_sequence=1,
                role="assistant",
                tool_calls=[ev.ToolCallRecord(id="d1", function=ev.FunctionCall(name="agent"))],
            ),
            ev.SubtraceSpawned(child_trace_id="t_child", tool_call_id="d1", task="x"),
        ]
    )
    model, script = scripted()
    outcome = await engine.run_turn(state, sink, model=model)
    assert outcome.end == "waiting" and state.wait_reason == "subtraces"
    assert script.requests == [] and state.unanswered_tool_calls()


async def test_failed_children_are_reported_as_a_failed_result(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("agent", {"task": "x"}, id="d1")))
    state = new_state()
    sink = MemorySink(state)
    await engine.run_turn(state, sink, model=model)
    finish_children(state, status="failed")
    model2, _ = scripted(answer("gave up"))
    await engine.run_turn(state, sink, model=model2)
    result = next(m for m in sink.of_type(ev.MessageAppended) if m.tool_call_id == "d1")
    assert result.error_code == "subtrace_failed" and "(delegate, failed)" in str(result.content)


async def test_continue_from_reuses_a_finished_child(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    model, _ = scripted(calls(call("agent", {"task": "x"}, id="d1")))
    state = new_state()
    sink = MemorySink(state)
    await engine.run_turn(state, sink, model=model)
    child = next(iter(state.subtraces))
    finish_children(state)
    model2, _ = scripted(
        calls(call("agent", {"task": "more", "continue_from": child}, id="d2")),
    )
    await engine.run_turn(state, sink, model=model2)
    again = sink.of_type(ev.SubtraceSpawned)[-1]
    assert again.child_trace_id == child and again.continue_from == child


async def test_evaluate_spawns_an_evaluator(tmp_path: Path) -> None:
    model, _ = scripted(
        calls(call("evaluate", {"subject": "the answer", "criteria": ["is correct"]}, id="v1"))
    )
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path).run_turn(state, sink, model=model)
    [spawned] = sink.of_type(ev.SubtraceSpawned)
    assert spawned.mode == "evaluate" and "- is correct" in spawned.task


async def test_mixed_waits_in_one_turn_are_refused(tmp_path: Path) -> None:
    model, _ = scripted(
        calls(
            call("agent", {"task": "x"}, id="d1"),
            call("ask_human", {"question": "ok?"}, id="h1"),
            call("glob", {"pattern": "*"}, id="g1"),
        )
    )
    state = new_state()
    sink = MemorySink(state)
    outcome = await make_engine(tmp_path).run_turn(state, sink, model=model)
    messages = {m.tool_call_id: m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"}
    assert messages["h1"].error_code == "deferred_conflict"
    assert messages["g1"].error_code is None
    assert outcome.end == "waiting" and state.wait_reason == "subtraces"
