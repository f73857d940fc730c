"""Checkpoints and resume: a planner killed with SIGKILL mid-task, a resume that skips the
completed phases (from checkpoints, or from the event log once they expired), and a crash
between a checkpoint and its ``phase_completed``."""

from __future__ import annotations

import asyncio

import msgspec
from longhaul.core.checkpoints import Checkpoint, Checkpoints, checkpoint_key
from longhaul.core.connection import Connection
from longhaul.core.repository import traces
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.state import TaskState
from longhaul.planner.offload import phase_output_key
from longhaul.planner.steps import ensure_step_trace, step_trace_created, step_trace_ids

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    Outcome,
    PlannerProcess,
    Policy,
    StepCompleter,
    Succeed,
    chain,
    create_task,
    failing,
    planner_service,
    request_resume,
    run_task,
    task_events,
    temp_dir,
    wait_task,
)
from tests.support.folds import task_state


class Gate:
    """Holds one phase's step trace open until released, and says when it was reached."""

    def __init__(self, phase_id: str) -> None:
        self.phase_id = phase_id
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def policy(self, created: ev.TraceCreated, _n: int) -> Outcome:
        if created.phase_id == self.phase_id:
            self.reached.set()
            await self.release.wait()
        return Succeed(f"output of {created.phase_id}")


async def planned_task(store: EventStore, phases: list[dict[str, object]]) -> TaskState:
    """A task whose plan is on the log and nothing else (as a planner left it)."""
    task_id = await create_task(store, phases=phases)
    created = await task_state(store, task_id)
    await store.append(
        "task",
        task_id,
        [ev.PlanCreated(phases=[msgspec.convert(p, ev.PhaseSpec) for p in phases])],
        expected=Position(created.stream_seq, created.version),
    )
    return await task_state(store, task_id)


def resumed(events: list[ev.Event]) -> ev.Resumed:
    [event] = [e for e in events if isinstance(e, ev.Resumed)]
    return event


async def crash_and_resume(
    conn: Connection,
    store: EventStore,
    config_factory: ConfigFactory,
    count: int,
    crash_at: str,
    *,
    before_resume: Policy | None = None,
    purge_checkpoints: bool = False,
) -> tuple[str, StepCompleter]:
    """Run a ``count``-phase chain in a planner subprocess, SIGKILL it when ``crash_at``
    starts, finish that step trace while no planner runs, then resume with a new planner."""
    gate = Gate(crash_at)
    completer = StepCompleter(conn, store, gate.policy)
    config = config_factory()
    with temp_dir() as logs:
        async with completer:
            first = await PlannerProcess(config, logs).start()
            try:
                task_id = await create_task(store, phases=chain(count))
                await asyncio.wait_for(gate.reached.wait(), 30)
            finally:
                await first.kill()
            if purge_checkpoints:
                kv = await conn.kv(conn.names.checkpoints)
                for n in range(1, count + 1):
                    await kv.purge(checkpoint_key(task_id, f"p{n}"))
            await request_resume(store, task_id)
            gate.release.set()
            async with PlannerProcess(config, logs) as second:
                try:
                    task = await wait_task(store, task_id, within=60)
                except TimeoutError:
                    raise AssertionError(second.log_tail()) from None
                assert await second.stop() == 0, second.log_tail()  # SIGTERM: clean exit
    assert task.status == "completed"
    return task_id, completer


async def test_killed_planner_resumes_without_rerunning_completed_phases(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task_id, completer = await crash_and_resume(conn, store, make_config, 4, "p3")
    events = await task_events(store, task_id)
    answer = resumed(events)
    assert answer.source == "checkpoint"
    assert answer.skipped == ["p1", "p2"] and answer.resumed_at == ["p3"]
    for pid in ("p1", "p2", "p3", "p4"):
        assert len(completer.trace_ids(pid)) == 1, pid  # nothing ran twice
    started = [e.phase_id for e in events if isinstance(e, ev.PhaseStarted)]
    assert started == ["p1", "p2", "p3", "p4"]
    state = await task_state(store, task_id)
    assert state.resume_source == "checkpoint"


async def test_ten_phase_task_crashing_at_phase_seven_resumes_at_phase_seven(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task_id, completer = await crash_and_resume(conn, store, make_config, 10, "p7")
    answer = resumed(await task_events(store, task_id))
    assert answer.skipped == [f"p{n}" for n in range(1, 7)]
    assert answer.resumed_at == ["p7"]
    assert all(len(completer.trace_ids(f"p{n}")) == 1 for n in range(1, 11))


async def test_resume_uses_the_event_log_when_checkpoints_expired(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task_id, completer = await crash_and_resume(
        conn, store, make_config, 4, "p3", purge_checkpoints=True
    )
    answer = resumed(await task_events(store, task_id))
    assert answer.source == "event_log" and answer.skipped == ["p1", "p2"]
    assert all(len(completer.trace_ids(f"p{n}")) == 1 for n in range(1, 5))


async def test_every_completed_phase_is_checkpointed(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task, _ = await run_task(conn, store, make_config(), chain(2))
    task_id = task.task_id
    checkpoints = Checkpoints(conn, enabled=True)
    for pid in ("p1", "p2"):
        saved = await checkpoints.load(task_id, pid)
        assert saved is not None
        assert saved.name == f"Phase {pid}" and saved.status == "completed"
        assert saved.result_ref == phase_output_key(task_id, pid)
        assert saved.task_status == "running" and saved.saved_at > 0
        assert saved.trace_id == task.phases[pid].trace_ids[0]


async def test_checkpoints_can_be_disabled(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task, _ = await run_task(conn, store, make_config(checkpoints=False), chain(1))
    task_id = task.task_id
    kv = await conn.kv(conn.names.checkpoints)
    entry = None
    try:
        entry = await kv.get(checkpoint_key(task_id, "p1"))
    except Exception as exc:  # nats-py's KeyNotFoundError
        assert type(exc).__name__ == "KeyNotFoundError"
    assert entry is None


async def test_checkpoint_written_before_a_crash_completes_the_phase_on_resume(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    """The planner died after saving p1's checkpoint but before logging phase_completed; p1's
    step trace never finished (its executor died too). Resume takes p1 from the checkpoint."""
    task = await planned_task(store, chain(2))
    task_id = task.task_id
    [p1_trace] = step_trace_ids(task, task.phases["p1"].spec, 1)
    await store.append(
        "task",
        task_id,
        [ev.PhaseStarted(phase_id="p1", trace_ids=[p1_trace])],
        expected=Position(task.stream_seq, task.version),
    )
    await ensure_step_trace(
        traces(store), p1_trace, step_trace_created(task, task.phases["p1"].spec, 0)
    )
    await Checkpoints(conn, enabled=True).save(
        Checkpoint(
            task_id=task_id,
            phase_id="p1",
            name="Phase p1",
            result_ref=phase_output_key(task_id, "p1"),
            summary="p1 was done",
            trace_id=p1_trace,
        )
    )
    await request_resume(store, task_id)
    completer = StepCompleter(conn, store)
    async with completer, planner_service(make_config()):
        done = await wait_task(store, task_id)
    assert done.status == "completed" and done.phases["p1"].summary == "p1 was done"
    answer = resumed(await task_events(store, task_id))
    assert answer.source == "checkpoint" and answer.skipped == ["p1"]
    assert completer.trace_ids("p1") == []  # not run again
    assert "p1 was done" in str(completer.seen["p2"][0].messages[0].content)


async def test_resume_of_a_failed_task_reruns_the_failed_phase(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    completer = StepCompleter(conn, store, failing("p2", times=1))  # fixed by the resume
    async with (
        completer,
        planner_service(make_config(max_replan_attempts=0, single_agent_fallback=False)),
    ):
        task_id = await create_task(store, phases=chain(3))
        failed = await wait_task(store, task_id)
        assert failed.status == "failed"
        await request_resume(store, task_id)
        task = await wait_task(store, task_id, lambda t: t.status == "completed")
    assert task.resumes == 1
    assert len(completer.trace_ids("p1")) == 1
    assert len(completer.trace_ids("p2")) == 2
    assert resumed(await task_events(store, task_id)).resumed_at == ["p2"]


async def test_step_trace_lost_between_phase_started_and_its_creation_is_created_on_resume(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task = await planned_task(store, chain(2))
    task_id = task.task_id
    lost = step_trace_ids(task, task.phases["p1"].spec, 1)
    await store.append(
        "task",
        task_id,
        [ev.PhaseStarted(phase_id="p1", trace_ids=lost)],
        expected=Position(task.stream_seq, task.version),
    )
    await request_resume(store, task_id)
    completer = StepCompleter(conn, store)
    async with completer, planner_service(make_config()):
        done = await wait_task(store, task_id)
    assert done.status == "completed"
    assert completer.trace_ids("p1") == lost  # the recorded id, created late, not a new one
    assert resumed(await task_events(store, task_id)).resumed_at == ["p1"]
