"""Failure handling: reflection, replanning that keeps completed phases, the replan limit,
and the single-agent fallback."""

from __future__ import annotations

import json
from pathlib import Path

from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.planner.offload import phase_output_key
from longhaul.planner.replan import SINGLE_AGENT_ID

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    StepCompleter,
    chain,
    create_task,
    failing,
    planner_service,
    run_task,
    task_events,
    wait_task,
)

CHAIN = chain(4)


async def test_failed_phase_is_replanned_and_completed_phases_are_kept(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    workspace = WorkspaceStore(conn)
    completer = StepCompleter(conn, store, failing("p3", times=1))
    async with completer, planner_service(make_config()):
        task_id = await create_task(store, phases=CHAIN)
        before = await wait_task(store, task_id, lambda t: bool(t.replans) or t.is_final)
        revisions = {}
        for pid in ("p1", "p2"):
            entry = await workspace.get(phase_output_key(task_id, pid))
            assert entry is not None
            revisions[pid] = entry.revision
        task = await wait_task(store, task_id)
    assert task.status == "completed"
    events = await task_events(store, task_id)
    [failed] = [e for e in events if isinstance(e, ev.PhaseFailed)]
    assert failed.phase_id == "p3" and "p3 broke (attempt 1)" in failed.error
    [replanned] = [e for e in events if isinstance(e, ev.Replanned)]
    assert replanned.kept == ["p1", "p2"]
    assert [p.id for p in replanned.phases] == ["p3", "p4"]
    assert "p3 broke" in replanned.reflection
    assert "p3 broke" in replanned.phases[0].description  # the retry knows what went wrong
    # Phases 1-2: same output entries (same revision), same summaries, never run again.
    for pid in ("p1", "p2"):
        entry = await workspace.get(phase_output_key(task_id, pid))
        assert entry is not None and entry.revision == revisions[pid]
        assert entry.value == f"output of {pid}".encode()
        assert task.phases[pid].summary == before.phases[pid].summary
        assert len(completer.trace_ids(pid)) == 1
    assert len(completer.trace_ids("p3")) == 2
    assert len(set(completer.trace_ids("p3"))) == 2  # the retry is a fresh step trace
    assert [e.phase_id for e in events if isinstance(e, ev.PhaseStarted)].count("p1") == 1


async def test_replan_limit_fails_the_task_with_all_reflections(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task, completer = await run_task(
        conn, store, make_config(max_replan_attempts=2), CHAIN[:3], policy=failing("p2", 99)
    )
    assert task.status == "failed"
    assert task.error == "phase p2 failed after 2 replans"
    events = await task_events(store, task.task_id)
    [failed] = [e for e in events if isinstance(e, ev.TaskFailed)]
    assert len(failed.reflections) == 3
    assert all("p2 broke" in r for r in failed.reflections)
    assert len(completer.trace_ids("p2")) == 3
    assert len(completer.trace_ids("p1")) == 1


async def test_single_agent_fallback_after_the_replan_limit(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    config = make_config(max_replan_attempts=1, single_agent_fallback=True)
    task, completer = await run_task(
        conn, store, config, CHAIN[:3], policy=failing("p2", times=99), goal="write the report"
    )
    assert task.status == "completed"
    assert list(task.phases) == ["p1", SINGLE_AGENT_ID]
    fallback = task.phases[SINGLE_AGENT_ID].spec
    assert fallback.depends_on == ["p1"]  # it builds on what was completed
    [created] = completer.seen[SINGLE_AGENT_ID]
    brief = created.messages[0].content
    assert isinstance(brief, str) and "write the report" in brief and "output of p1" in brief
    assert task.summary == f"output of {SINGLE_AGENT_ID}"


async def test_model_replan_uses_the_reflection_and_new_phases(
    conn: Connection, store: EventStore, make_config: ConfigFactory, tmp_path: Path
) -> None:
    new_plan = {
        "phases": [
            {
                "id": "p3b",
                "name": "Smaller step",
                "description": "do p3 in a smaller way, carefully",
                "depends_on": ["p2"],
                "criteria": ["works"],
                "tools": [],
            },
        ]
    }
    script = tmp_path / "planner.yaml"
    script.write_text(
        json.dumps(
            [
                {"content": "p3 was too big; split it"},
                {"content": json.dumps(new_plan)},
            ]
        )
    )
    task, _ = await run_task(
        conn,
        store,
        make_config(roles={"planner": f"scripted:{script}"}),
        CHAIN[:3],
        policy=failing("p3", times=1),
    )
    assert task.status == "completed"
    assert task.order == ["p1", "p2", "p3b"]
    assert task.replans == ["p3 was too big; split it"]
