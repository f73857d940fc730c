"""The planner's decisions over the in-memory store: plan, start ready phases and their step
traces, refuse an invalid plan, and re-read after a lost race. Steps that ask other services
(trace outcomes, checkpoints, the workspace) stay in tests/integration/planner/."""

from __future__ import annotations

from typing import Any, cast

import pytest
from longhaul.core.checkpoints import Checkpoints
from longhaul.core.connection import Connection
from longhaul.core.memory import MemoryStore
from longhaul.core.repository import tasks, traces
from longhaul.core.store import ConcurrencyError, Position
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.config import ModelsConfig, PipelineConfig
from longhaul.domain.events import Aggregate
from longhaul.llm.registry import ModelRegistry
from longhaul.planner.driver import PlannerDeps, TaskDriver
from longhaul.planner.models import PlannerModels
from longhaul.planner.steps import ensure_step_trace, step_trace_created

from tests.support.folds import task_state, trace_state

NO_SERVER = cast(Connection, None)
"""These steps never reach NATS; a step that did would fail on it, not pass silently."""


def driver(store: MemoryStore, *, max_concurrent_phases: int = 3) -> TaskDriver:
    models = ModelsConfig()
    return TaskDriver(
        PlannerDeps(
            conn=NO_SERVER,
            traces=traces(store),
            tasks=tasks(store, cache_size=256),
            workspace=WorkspaceStore(NO_SERVER),
            checkpoints=Checkpoints(NO_SERVER, enabled=False),
            models=PlannerModels(ModelRegistry(models), models),
            pipeline=PipelineConfig(max_concurrent_phases=max_concurrent_phases),
            presets=["default"],
            tools=["read"],
        )
    )


def phase(pid: str, *depends_on: str) -> dict[str, Any]:
    return {
        "id": pid,
        "name": pid.upper(),
        "description": f"do {pid}",
        "depends_on": list(depends_on),
    }


async def created(store: MemoryStore, phases: list[dict[str, Any]]) -> None:
    await store.append(
        "task",
        "task_1",
        [ev.TaskCreated(goal="g", options={"phases": phases})],
        expected=Position(),
    )


async def types(
    store: MemoryStore, aggregate: Aggregate = "task", aid: str = "task_1"
) -> list[str]:
    return [r.event.type async for r in store.replay(aggregate, aid)]


async def steps(planner: TaskDriver, count: int) -> None:
    """Take ``count`` steps on task_1 (``drive`` would go on to ask the step traces' status,
    which needs a server)."""
    for _ in range(count):
        assert await planner.step(await planner.tasks.load("task_1"))


async def test_a_given_plan_starts_its_ready_phases_and_their_step_traces() -> None:
    store = MemoryStore()
    await created(store, [phase("a"), phase("b"), phase("c", "a", "b")])
    await steps(driver(store, max_concurrent_phases=1), 2)
    assert await types(store) == ["task_created", "plan_created", "phase_started"]
    task = await task_state(store, "task_1")
    assert task.plan_source == "options" and task.running_phases() == ["a"]
    [trace_id] = task.phases["a"].trace_ids
    step = await trace_state(store, trace_id)
    assert step.exists and step.task_id == "task_1" and step.phase_id == "a"
    assert "do a" in str(step.main_path()[0].content)


async def test_an_invalid_given_plan_fails_the_task() -> None:
    store = MemoryStore()
    await created(store, [phase("a", "b"), phase("b", "a")])
    await driver(store).drive("task_1")
    task = await task_state(store, "task_1")
    assert task.status == "failed" and "invalid plan" in task.error


async def test_a_lost_race_is_given_back_and_the_step_taken_again_on_a_fresh_read() -> None:
    store = MemoryStore()
    await created(store, [phase("a")])
    planner = driver(store)
    task = await planner.tasks.load("task_1")
    # A resume request lands just before the planner's first append.
    store.interleave("task", "task_1", ev.ResumeRequested())
    with pytest.raises(ConcurrencyError):
        await planner.step(task)
    assert task.version == 1  # nothing applied that is not on the log
    await steps(planner, 3)
    assert await types(store) == [
        "task_created",
        "resume_requested",
        "resumed",
        "plan_created",
        "phase_started",
    ]


async def test_creating_a_step_trace_twice_is_a_no_op() -> None:
    store = MemoryStore()
    await created(store, [phase("a")])
    await steps(driver(store), 2)
    task = await task_state(store, "task_1")
    [trace_id] = task.phases["a"].trace_ids
    created_again = step_trace_created(task, task.phases["a"].spec, 0)
    assert not await ensure_step_trace(traces(store), trace_id, created_again)
    assert await types(store, "trace", trace_id) == ["trace_created"]
