"""Bounded delegation: sub-traces lose ``agent`` / ``evaluate`` unless their preset allows
nesting; the depth and per-root descendant limits refuse with a ``delegation_limit`` error."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent.presets import PresetCatalog
from longhaul.agent.tools.settings import ToolSettings
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.llm.types import ModelRequest

from tests.unit.agent.support import MemorySink, answer, call, calls, make_engine, scripted

NESTING = PresetCatalog({"manager": {"allow_nesting": True}})


def trace(
    *, depth: int = 0, preset: str = "default", max_descendants: int | None = None
) -> TraceState:
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id="t_child" if depth else "t_root",
            messages=[ev.InputMessage(role="user", content="work")],
            config=ev.TraceConfig(preset=preset),
            parent_trace_id="t_parent" if depth else None,
            depth=depth,
            max_descendants=max_descendants,
        )
    )
    return state


def offered(request: ModelRequest) -> set[str]:
    return {spec.name for spec in request.tools}


async def test_a_child_on_the_default_preset_is_offered_no_agent_or_evaluate(
    tmp_path: Path,
) -> None:
    model, script = scripted(answer("done"))
    state = trace(depth=1)
    await make_engine(tmp_path).run_turn(state, MemorySink(state), model=model)
    tools = offered(script.requests[0])
    assert "agent" not in tools and "evaluate" not in tools and "read" in tools
    root_model, root_script = scripted(answer("done"))
    root = trace()
    await make_engine(tmp_path).run_turn(root, MemorySink(root), model=root_model)
    assert {"agent", "evaluate"} <= offered(root_script.requests[0])


async def test_a_child_whose_preset_allows_nesting_keeps_agent(tmp_path: Path) -> None:
    model, script = scripted(answer("done"))
    state = trace(depth=1, preset="manager")
    await make_engine(tmp_path, presets=NESTING).run_turn(state, MemorySink(state), model=model)
    assert {"agent", "evaluate"} <= offered(script.requests[0])


async def test_delegating_below_the_depth_limit_is_refused_with_a_tool_error(
    tmp_path: Path,
) -> None:
    model, _ = scripted(calls(call("agent", {"task": "go deeper"}, id="a1")), answer("myself"))
    state = trace(depth=2, preset="manager")
    sink = MemorySink(state)
    outcome = await make_engine(tmp_path, presets=NESTING).run_turn(state, sink, model=model)
    assert outcome.end == "completed" and state.subtraces == {}
    [result] = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert result.error_code == "delegation_limit"
    assert "nest at most 2 deep" in str(result.content)


async def test_more_descendants_than_the_root_allows_are_refused(tmp_path: Path) -> None:
    explore = call("agent", {"mode": "explore", "tasks": ["a", "b", "c"]}, id="e1")
    model, _ = scripted(calls(explore), answer("myself"))
    state = trace()
    sink = MemorySink(state)
    engine = make_engine(tmp_path, tool_settings=ToolSettings(max_descendants=2))
    outcome = await engine.run_turn(state, sink, model=model)
    assert outcome.end == "completed" and state.subtraces == {}
    [result] = [m for m in sink.of_type(ev.MessageAppended) if m.role == "tool"]
    assert result.error_code == "delegation_limit"
    assert "limit of 2 sub-traces per root" in str(result.content)


def test_a_childs_descendants_count_on_its_parent_when_it_finishes() -> None:
    state = trace()
    for n in range(2):
        state.apply(
            ev.SubtraceSpawned(aggregate_id="t_root", child_trace_id=f"t_c{n}", tool_call_id="x")
        )
    assert state.descendants == 2
    state.apply(
        ev.SubtraceFinished(
            aggregate_id="t_root", child_trace_id="t_c0", status="completed", descendants=3
        )
    )
    assert state.descendants == 5
