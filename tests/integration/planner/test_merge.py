"""Competitive phases: every competitor runs as its own step trace, a merge strategy picks
or builds the phase's result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.planner.offload import phase_output_key

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    Fail,
    Outcome,
    StepCompleter,
    Succeed,
    phase,
    run_task,
    task_events,
)

NAMES = ["alpha", "beta", "gamma"]


def script(path: Path, *turns: Any) -> str:
    path.write_text(
        json.dumps([{"content": t if isinstance(t, str) else json.dumps(t)} for t in turns])
    )
    return f"scripted:{path}"


def competitive(merge: str, models: list[str] | None = None) -> dict[str, Any]:
    competitors = [
        {"name": name, **({"model": models[i]} if models else {"preset": "default"})}
        for i, name in enumerate(NAMES)
    ]
    return phase("race", merge=merge, competitors=competitors, criteria=["is complete"])


async def answer_by_name(created: ev.TraceCreated, _n: int) -> Outcome:
    name = next(n for n in NAMES if f"[{n}]" in (created.name or ""))
    return Succeed(f"answer from {name}")


async def run_race(
    conn: Connection,
    store: EventStore,
    config: Any,
    spec: dict[str, Any],
    policy: Any = answer_by_name,
) -> tuple[Any, StepCompleter, str]:
    task, completer = await run_task(conn, store, config, [spec], policy=policy)
    entry = await WorkspaceStore(conn).get(phase_output_key(task.task_id, "race"))
    output = entry.value.decode() if entry else ""
    return task, completer, output


def completed_event(events: list[ev.Event]) -> ev.PhaseCompleted:
    [done] = [e for e in events if isinstance(e, ev.PhaseCompleted)]
    return done


async def test_all_competitors_run_as_separate_step_traces(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task, completer, _ = await run_race(conn, store, make_config(), competitive("first"))
    created = completer.seen["race"]
    assert len(created) == 3 and len({c.aggregate_id for c in created}) == 3
    assert task.phases["race"].trace_ids == [c.aggregate_id for c in created]
    assert sorted(c.name or "" for c in created) == [f"Phase race [{n}]" for n in NAMES]


async def test_best_lets_a_judge_pick(
    conn: Connection, store: EventStore, make_config: ConfigFactory, tmp_path: Path
) -> None:
    judge = script(tmp_path / "judge.yaml", {"best": 2, "reason": "most complete"})
    task, _, output = await run_race(
        conn, store, make_config(roles={"planner": judge}), competitive("best")
    )
    assert output == "answer from beta"
    done = completed_event(await task_events(store, task.task_id))
    assert done.trace_id == task.phases["race"].trace_ids[1]
    # The decision is on the log, not only in planner.log.
    assert done.merge is not None
    assert (done.merge.strategy, done.merge.method) == ("best", "judge")
    assert done.merge.winner == done.trace_id and "most complete" in done.merge.reason
    assert [c.label for c in done.merge.candidates] == NAMES
    assert [c.trace_id for c in done.merge.candidates] == task.phases["race"].trace_ids
    assert task.phases["race"].merge == done.merge


async def test_vote_sums_the_scores_competitors_give_each_other(
    conn: Connection, store: EventStore, make_config: ConfigFactory, tmp_path: Path
) -> None:
    ballots = {  # candidate numbers are competitor positions: 1 alpha, 2 beta, 3 gamma
        "alpha": [{"candidate": 2, "score": 9}, {"candidate": 3, "score": 2}],
        "beta": [{"candidate": 1, "score": 3}, {"candidate": 3, "score": 4}],
        "gamma": [{"candidate": 1, "score": 5}, {"candidate": 2, "score": 8}],
    }
    models = [
        script(tmp_path / f"{n}.yaml", "unused step turn", {"scores": ballots[n]}) for n in NAMES
    ]
    task, _, output = await run_race(conn, store, make_config(), competitive("vote", models))
    assert output == "answer from beta"  # alpha 8, beta 17, gamma 6
    done = completed_event(await task_events(store, task.task_id))
    assert done.trace_id == task.phases["race"].trace_ids[1]
    assert done.merge is not None and done.merge.method == "vote"
    assert [c.score for c in done.merge.candidates] == [8, 17, 6]


async def test_fusion_merges_all_candidates(
    conn: Connection, store: EventStore, make_config: ConfigFactory, tmp_path: Path
) -> None:
    fuser = script(tmp_path / "fuse.yaml", "alpha's intro with beta's data and gamma's summary")
    task, _, output = await run_race(
        conn, store, make_config(roles={"planner": fuser}), competitive("fusion")
    )
    assert output == "alpha's intro with beta's data and gamma's summary"
    done = completed_event(await task_events(store, task.task_id))
    assert done.trace_id is None
    assert done.merge is not None and done.merge.method == "fusion"
    assert done.merge.winner is None and len(done.merge.candidates) == 3


async def test_without_a_model_the_first_successful_result_wins(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    async def alpha_fails(created: ev.TraceCreated, n: int) -> Outcome:
        if "[alpha]" in (created.name or ""):
            return Fail("alpha crashed")
        return await answer_by_name(created, n)

    for merge in ("best", "vote", "fusion"):
        task, _, output = await run_race(
            conn, store, make_config(), competitive(merge), alpha_fails
        )
        assert task.status == "completed"
        assert output == "answer from beta", merge
        done = completed_event(await task_events(store, task.task_id))
        assert done.merge is not None
        assert (done.merge.strategy, done.merge.method) == (merge, "first")
        assert [c.status for c in done.merge.candidates] == ["failed", "completed", "completed"]
        assert done.merge.winner == task.phases["race"].trace_ids[1]


async def test_a_phase_fails_only_when_every_competitor_failed(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    async def all_fail(created: ev.TraceCreated, _n: int) -> Outcome:
        return Fail("no luck")

    task, _, _ = await run_race(
        conn,
        store,
        make_config(max_replan_attempts=0, single_agent_fallback=False),
        competitive("best"),
        all_fail,
    )
    assert task.status == "failed"
    [failed] = [e for e in await task_events(store, task.task_id) if isinstance(e, ev.PhaseFailed)]
    assert failed.error.count("failed: no luck") == 3


def most_traces_running(events: list[ev.Event]) -> int:
    """The most step traces the task log ever shows running at once (every competitor)."""
    running: dict[str, int] = {}
    most = 0
    for event in events:
        if isinstance(event, ev.PhaseStarted):
            running[event.phase_id] = len(event.trace_ids)
        elif isinstance(event, ev.PhaseCompleted | ev.PhaseFailed):
            running.pop(event.phase_id, None)
        most = max(most, sum(running.values()))
    return most


def pair(pid: str) -> dict[str, Any]:
    return phase(
        pid,
        merge="first",
        competitors=[{"name": n, "preset": "default"} for n in ("alpha", "beta")],
    )


async def test_competitors_count_against_the_budget_of_running_traces(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    # Three independent phases of two competitors each, a budget of four running traces:
    # two phases at once (4 traces), never all three (6).
    task, _ = await run_task(
        conn, store, make_config(max_concurrent_phases=4), [pair("x"), pair("y"), pair("z")]
    )
    assert task.status == "completed", task.error
    events = await task_events(store, task.task_id)
    assert most_traces_running(events) == 4
    first_started = [e.phase_id for e in events if isinstance(e, ev.PhaseStarted)][:2]
    assert first_started == ["x", "y"]


async def test_a_phase_with_more_competitors_than_the_budget_runs_alone(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task, _ = await run_task(
        conn,
        store,
        make_config(max_concurrent_phases=2),
        [competitive("first"), phase("after")],
    )
    assert task.status == "completed"
    events = await task_events(store, task.task_id)
    started = [e for e in events if isinstance(e, ev.PhaseStarted)]
    assert [(e.phase_id, len(e.trace_ids)) for e in started] == [("race", 3), ("after", 1)]
    assert most_traces_running(events) == 3
