"""Scheduling against real step-trace aggregates: order, concurrency, offloading, completion.

Step traces are ended by :class:`StepCompleter` so each test controls exactly when a phase
finishes; the planner only ever sees their events, as it does with real executors.
"""

from __future__ import annotations

import asyncio

from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.planner.offload import SUMMARY_LIMIT, phase_output_key, task_output_key

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    Outcome,
    StepCompleter,
    Succeed,
    create_task,
    max_running,
    phase,
    planner_service,
    position,
    run_task,
    task_events,
    wait_task,
)
from tests.support.folds import task_state

DIAMOND = [phase("a"), phase("b", "a"), phase("c", "a"), phase("d", "a"), phase("e", "b", "c", "d")]


async def test_diamond_runs_in_dependency_order_within_the_concurrency_limit(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    async with StepCompleter(conn, store), planner_service(make_config(max_concurrent_phases=2)):
        task_id = await create_task(store, phases=DIAMOND)
        task = await wait_task(store, task_id)
    assert task.status == "completed"
    events = await task_events(store, task_id)
    assert [type(e).__name__ for e in events[:2]] == ["TaskCreated", "PlanCreated"]
    for middle in "bcd":
        assert position(events, ev.PhaseStarted, middle) > position(events, ev.PhaseCompleted, "a")
        assert position(events, ev.PhaseStarted, "e") > position(events, ev.PhaseCompleted, middle)
    assert max_running(events) == 2  # the limit was reached and never exceeded
    assert isinstance(events[-1], ev.TaskCompleted)
    assert events[-1].summary == "output of e"


async def test_independent_phases_run_in_parallel_up_to_three(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    release = asyncio.Event()
    started: set[str] = set()
    three_running = asyncio.Event()

    async def hold_until_three(created: ev.TraceCreated, _n: int) -> Outcome:
        started.add(created.phase_id or "")
        if len(started) == 3:
            three_running.set()
        await release.wait()
        return Succeed(f"output of {created.phase_id}")

    phases = [phase(str(n)) for n in range(5)]
    async with StepCompleter(conn, store, hold_until_three), planner_service(make_config()):
        task_id = await create_task(store, phases=phases)
        await asyncio.wait_for(three_running.wait(), 20)
        # Three run, none finished: the planner must not have started a fourth.
        state = await task_state(store, task_id)
        assert len(state.running_phases()) == 3
        release.set()
        await wait_task(store, task_id)
    assert max_running(await task_events(store, task_id)) == 3


async def test_dependants_get_summaries_and_references_not_full_outputs(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    big = "word " * 80_000  # 400 kB: lives in the object store, not in any prompt

    async def big_first(created: ev.TraceCreated, _n: int) -> Outcome:
        return Succeed(big if created.phase_id == "a" else f"output of {created.phase_id}")

    phases = [phase("a"), phase("b", "a")]
    task, completer = await run_task(conn, store, make_config(), phases, policy=big_first)
    task_id = task.task_id
    key = phase_output_key(task_id, "a")
    assert task.phases["a"].output_ref == key
    assert len(task.phases["a"].summary) <= SUMMARY_LIMIT
    entry = await WorkspaceStore(conn).get(key)
    assert entry is not None and entry.value.decode() == big
    [b_created] = completer.seen["b"]
    brief = b_created.messages[0].content
    assert isinstance(brief, str)
    assert f"key: {key}" in brief and task.phases["a"].summary in brief
    assert len(brief) < 2000
    assert b_created.config.tools == ["workspace_read"]  # added so the agent can read it
    assert b_created.task_id == task_id and b_created.phase_id == "b"
    final = await WorkspaceStore(conn).get(task_output_key(task_id))
    assert final is not None and final.value == b"output of b"


async def test_step_trace_config_carries_phase_settings(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    spec = phase(
        "x",
        preset="analyst",
        model="scripted:auto",
        verification={"judge": True},
        criteria=["is right"],
    )
    _, completer = await run_task(conn, store, make_config(), [spec], working_dir="/tmp")
    [created] = completer.seen["x"]
    assert created.config.preset == "analyst"
    assert created.config.model == "scripted:auto"
    assert created.config.working_dir == "/tmp"
    assert created.config.verification == {"judge": True, "criteria": ["is right"]}


async def test_invalid_explicit_plan_fails_the_task(
    store: EventStore, make_config: ConfigFactory
) -> None:
    cycle = [phase("a", "b"), phase("b", "a")]
    async with planner_service(make_config()):
        task_id = await create_task(store, phases=cycle)
        task = await wait_task(store, task_id)
    assert task.status == "failed"
    assert task.error.startswith("invalid plan: dependency cycle")


async def test_too_many_phases_are_refused(store: EventStore, make_config: ConfigFactory) -> None:
    async with planner_service(make_config(max_phases=3)):
        task_id = await create_task(store, phases=[phase(str(n)) for n in range(4)])
        task = await wait_task(store, task_id)
    assert task.status == "failed" and "phases" in task.error
