"""The pure task fold: phase DAG validation, statuses, replans, resume."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TaskState, validate_phase_graph


def phase(pid: str, *deps: str) -> ev.PhaseSpec:
    return ev.PhaseSpec(id=pid, name=pid, depends_on=list(deps))


DIAMOND = [phase("a"), phase("b", "a"), phase("c", "a"), phase("d", "b", "c"), phase("e", "d")]


def planned(phases: list[ev.PhaseSpec] = DIAMOND) -> TaskState:
    state = TaskState()
    state.apply(ev.TaskCreated(aggregate_id="k_1", goal="write a report"))
    state.apply(ev.PlanCreated(phases=phases))
    return state


def run(state: TaskState, pid: str, ok: bool = True) -> None:
    state.apply(ev.PhaseStarted(phase_id=pid, trace_ids=[f"t_{pid}"]))
    if ok:
        state.apply(ev.PhaseCompleted(phase_id=pid, summary=f"{pid} done", output_ref=f"ref/{pid}"))
    else:
        state.apply(ev.PhaseFailed(phase_id=pid, error="boom"))


def test_diamond_layers_and_readiness() -> None:
    state = planned()
    assert state.layers() == [["a"], ["b", "c"], ["d"], ["e"]]
    assert state.ready_phases() == ["a"]
    run(state, "a")
    assert state.ready_phases() == ["b", "c"]
    run(state, "b")
    assert state.ready_phases() == ["c"]
    run(state, "c")
    assert state.ready_phases() == ["d"]


@pytest.mark.parametrize(
    ("phases", "fragment"),
    [
        ([phase("a", "b"), phase("b", "a")], "cycle"),
        ([phase("a", "zzz")], "unknown"),
        ([phase("a"), phase("a")], "unique"),
        ([], "at least one"),
    ],
)
def test_invalid_plans_are_rejected(phases: list[ev.PhaseSpec], fragment: str) -> None:
    with pytest.raises(InvalidTransition) as info:
        validate_phase_graph(phases)
    assert fragment in str(info.value)


def test_max_phases_enforced() -> None:
    with pytest.raises(InvalidTransition):
        validate_phase_graph([phase(f"p{i}") for i in range(11)], max_phases=10)


def test_replan_keeps_completed_phases() -> None:
    state = planned()
    run(state, "a")
    run(state, "b")
    run(state, "c", ok=False)
    state.apply(
        ev.Replanned(
            reflection="c lacked data",
            kept=["a", "b"],
            phases=[phase("c2", "a"), phase("d", "b", "c2"), phase("e", "d")],
        )
    )
    assert state.phases["a"].status == "completed" and state.phases["a"].output_ref == "ref/a"
    assert state.phases["b"].summary == "b done"
    assert state.order == ["a", "b", "c2", "d", "e"]
    assert state.ready_phases() == ["c2"]
    assert state.replans == ["c lacked data"]


def test_phase_transitions_are_checked() -> None:
    state = planned()
    with pytest.raises(InvalidTransition):
        state.apply(ev.PhaseCompleted(phase_id="a"))
    with pytest.raises(InvalidTransition):
        state.apply(ev.PhaseStarted(phase_id="nope"))


def test_resume_of_failed_task_resets_failed_phases() -> None:
    state = planned([phase("a"), phase("b", "a")])
    run(state, "a")
    run(state, "b", ok=False)
    state.apply(ev.TaskFailed(error="b failed"))
    state.apply(ev.ResumeRequested())
    assert state.status == "running"
    assert state.phases["b"].status == "pending" and state.phases["a"].status == "completed"
    assert state.ready_phases() == ["b"]


def test_completed_task_cannot_resume() -> None:
    state = planned([phase("a")])
    run(state, "a")
    state.apply(ev.TaskCompleted(summary="ok"))
    assert state.all_completed()
    with pytest.raises(InvalidTransition):
        state.apply(ev.ResumeRequested())
