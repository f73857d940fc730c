"""A trace's sub-traces (``longhaul.domain.state.children``)."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev
from longhaul.domain.state.children import CONTEXT_HEADING, Children
from longhaul.domain.state.errors import InvalidTransition


def spawn(child: str, call: str = "c_1", **more: object) -> ev.SubtraceSpawned:
    return ev.SubtraceSpawned(child_trace_id=child, tool_call_id=call, task="look", **more)  # type: ignore[arg-type]


def finished(child: str, **more: object) -> ev.SubtraceFinished:
    return ev.SubtraceFinished(child_trace_id=child, status="completed", summary="ok", **more)  # type: ignore[arg-type]


def test_spawned_children_run_until_they_report_their_end() -> None:
    children = Children()
    children.spawned(spawn("t_a"), "g_1")
    children.spawned(spawn("t_b"), "g_1")
    assert [i.child_trace_id for i in children.running()] == ["t_a", "t_b"]
    info = children.finished(finished("t_a", descendants=3, model_calls=4))
    assert (info.status, info.summary, info.goal_id) == ("completed", "ok", "g_1")
    assert [i.child_trace_id for i in children.running()] == ["t_b"]
    assert children.descendants == 2 + 3 and children.model_calls() == 4
    assert [i.child_trace_id for i in children.of(["t_b", "t_gone", "t_a"])] == ["t_b", "t_a"]


def test_an_unknown_child_cannot_finish_or_link() -> None:
    children = Children()
    children.spawned(spawn("t_local"), None)
    with pytest.raises(InvalidTransition) as unknown:
        children.check_finished(finished("t_other"))
    assert unknown.value.code == "not_found"
    with pytest.raises(InvalidTransition, match="no remote sub-trace t_local"):
        children.check_linked(ev.RemoteSubtraceLinked(child_trace_id="t_local", remote_id="x"))


def test_a_remote_child_keeps_its_link_when_spawned_again() -> None:
    children = Children()
    children.spawned(spawn("t_r", remote="peer"), None)
    link = ev.RemoteSubtraceLinked(child_trace_id="t_r", remote_id="agent://peer:1/t_x")
    children.check_linked(link)
    children.linked(link)
    assert children.subtraces["t_r"].linked
    children.spawned(spawn("t_r", "c_2", remote="peer", continue_from="t_r"), None)
    again = children.subtraces["t_r"]
    assert (again.remote_id, again.linked, again.display_id) == (
        "agent://peer:1/t_x",
        False,
        "agent://peer:1/t_x",
    )


def test_a_child_is_given_its_seed_then_its_task_with_the_context() -> None:
    children = Children()
    seed = ev.InputMessage(role="user", content="earlier")
    children.spawned(spawn("t_c", messages=[seed], context="background"), None)
    inputs = children.subtraces["t_c"].inputs()
    assert inputs[0] == seed and inputs[1].content == f"look{CONTEXT_HEADING}background"
