"""Where traces work: each key in its own directory, a trace (with its sub-traces) or a task
(with its phases) in one directory below it, and nothing a trace asks for leads out of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.workdir import WorkingDirError, trace_home, trace_working_dir
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState


def trace(trace_id: str, **created: object) -> TraceState:
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id=trace_id,
            messages=[ev.InputMessage(role="user", content="go")],
            **created,  # type: ignore[arg-type]
        )
    )
    return state


def test_each_key_has_its_own_directory_shared_by_a_trace_and_its_sub_traces(
    tmp_path: Path,
) -> None:
    root = trace("t_root", owner="k_aaaa")
    child = trace("t_child", owner="k_aaaa", parent_trace_id="t_root", root_trace_id="t_root")
    other = trace("t_other", owner="k_bbbb")
    assert trace_home(tmp_path, root) == tmp_path / "keys" / "k_aaaa" / "t_root"
    assert trace_home(tmp_path, child) == trace_home(tmp_path, root)
    assert trace_home(tmp_path, other) == tmp_path / "keys" / "k_bbbb" / "t_other"


def test_a_task_s_phases_share_the_task_s_directory(tmp_path: Path) -> None:
    one = trace("t_step1", owner="k_aaaa", task_id="k_task")
    two = trace("t_step2", owner="k_aaaa", task_id="k_task")
    assert trace_home(tmp_path, one) == trace_home(tmp_path, two)
    assert trace_home(tmp_path, one) == tmp_path / "keys" / "k_aaaa" / "k_task"


def test_requested_directories_stay_inside_the_key_s_directory(tmp_path: Path) -> None:
    mine = trace("t_mine", owner="k_aaaa")
    (tmp_path / "keys" / "k_bbbb" / "t_theirs").mkdir(parents=True)
    inside = trace_working_dir(tmp_path, mine, "build")
    assert inside == (tmp_path / "keys" / "k_aaaa" / "t_mine" / "build").resolve()
    for requested in (
        "../../k_bbbb/t_theirs",
        "..",
        str(tmp_path / "keys" / "k_bbbb" / "t_theirs"),
        str(tmp_path),
        "/",
    ):
        with pytest.raises(WorkingDirError):
            trace_working_dir(tmp_path, mine, requested)
    link = inside / "out"
    link.symlink_to(tmp_path / "keys" / "k_bbbb" / "t_theirs")
    with pytest.raises(WorkingDirError):
        trace_working_dir(tmp_path, mine, "build/out")


def test_an_owner_or_scope_that_is_not_a_plain_name_is_refused(tmp_path: Path) -> None:
    for owner in ("..", "k/../../x"):
        with pytest.raises(WorkingDirError):
            trace_home(tmp_path, trace("t_x", owner=owner))
    with pytest.raises(WorkingDirError):
        trace_home(tmp_path, trace(".."))  # an ownerless trace's id is checked too


def test_an_ownerless_trace_works_in_a_directory_of_its_own_never_the_root(
    tmp_path: Path,
) -> None:
    for owner in (None, ""):
        alone = trace("t_alone", owner=owner)
        child = trace("t_child", owner=owner, parent_trace_id="t_alone", root_trace_id="t_alone")
        assert trace_home(tmp_path, alone) == tmp_path / "unowned" / "t_alone"
        assert trace_home(tmp_path, child) == trace_home(tmp_path, alone)
    assert trace_working_dir(tmp_path, trace("t_alone"), None) == tmp_path / "unowned" / "t_alone"
    with pytest.raises(WorkingDirError):
        trace_working_dir(tmp_path, trace("t_alone"), str(tmp_path))
