"""Helpers for planner tests: tasks, waiting on the task log, planners in-process or as real
subprocesses, and a step-trace completer that plays the executor's part where a test needs
exact control over which phase succeeds, fails or stays running."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import msgspec
from longhaul.core.config import LonghaulConfig
from longhaul.core.connection import Connection
from longhaul.core.service import ServiceContext, open_context
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.messages import Usage
from longhaul.domain.state import TaskState, TraceState
from longhaul.planner.main import run as run_planner
from longhaul.verifier.main import run as run_verifier

from tests.support.env import service_env as base_service_env
from tests.support.folds import task_state, trace_state
from tests.support.stack import ServiceProcess, fold_until

# ------------------------------------------------------------------------------ tasks


def phase(pid: str, *deps: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": pid,
        "name": f"Phase {pid}",
        "description": f"do {pid}",
        "depends_on": list(deps),
        "tools": [],
        **fields,
    }


def chain(count: int) -> list[dict[str, Any]]:
    """``count`` phases p1 → p2 → … each depending on the one before."""
    return [phase(f"p{n}", *([f"p{n - 1}"] if n > 1 else [])) for n in range(1, count + 1)]


async def create_task(
    store: EventStore,
    goal: str = "a goal",
    *,
    phases: list[dict[str, Any]] | None = None,
    task_id: str | None = None,
    **options: Any,
) -> str:
    task_id = task_id or new_id("task")
    if phases is not None:
        options["phases"] = phases
    await store.append(
        "task",
        task_id,
        [ev.TaskCreated(goal=goal, options=options)],
        expected=Position(),
        actor="test",
    )
    return task_id


async def request_resume(store: EventStore, task_id: str) -> None:
    task = await task_state(store, task_id)
    event = ev.ResumeRequested()
    probe = msgspec.convert(msgspec.to_builtins(task), TaskState)
    probe.apply(event)  # what the gateway does: refuse a resume that cannot apply
    await store.append(
        "task", task_id, [event], expected=Position(task.stream_seq, task.version), actor="test"
    )


async def task_events(store: EventStore, task_id: str) -> list[ev.Event]:
    return [r.event async for r in store.replay("task", task_id)]


def final_task(task: TaskState) -> bool:
    return task.is_final


def _task_stuck(task: TaskState) -> str:
    phases = {pid: p.status for pid, p in task.phases.items()}
    return f"stuck: {task.status} {phases} {task.error}"


async def wait_task(
    store: EventStore,
    task_id: str,
    predicate: Callable[[TaskState], bool] = final_task,
    *,
    within: float = 30.0,
) -> TaskState:
    """Fold the task's events live until ``predicate`` holds (TimeoutError after ``within``)."""
    return await fold_until(
        store, "task", task_id, TaskState(), predicate, within=within, describe=_task_stuck
    )


def max_running(events: list[ev.Event]) -> int:
    """The most phases the task log ever shows running at once."""
    running: set[str] = set()
    most = 0
    for event in events:
        if isinstance(event, ev.PhaseStarted):
            running.add(event.phase_id)
        elif isinstance(event, ev.PhaseCompleted | ev.PhaseFailed):
            running.discard(event.phase_id)
        most = max(most, len(running))
    return most


def position(events: list[ev.Event], kind: type[ev.Event], phase_id: str, nth: int = 0) -> int:
    """Index in the task log of the ``nth`` ``kind`` event for ``phase_id``."""
    hits = [
        i
        for i, e in enumerate(events)
        if isinstance(e, kind) and getattr(e, "phase_id", None) == phase_id
    ]
    return hits[nth]


# ------------------------------------------------------------------------------ planners


class InProcessService:
    """A service's ``run`` on its own connection in the test's event loop."""

    def __init__(
        self,
        config: LonghaulConfig,
        name: str = "planner",
        run: Callable[[ServiceContext], Coroutine[Any, Any, None]] = run_planner,
    ) -> None:
        self.config = config
        self.name = name
        self.run = run
        self.ctx: ServiceContext | None = None
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        self.ctx = await open_context(self.name, self.config)
        self.task = asyncio.create_task(self.run(self.ctx))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.ctx is not None and self.task is not None
        self.ctx.shutdown.set()
        await asyncio.wait_for(self.task, timeout=15)
        await self.ctx.close()


def planner_service(config: LonghaulConfig) -> InProcessService:
    return InProcessService(config)


def verifier_service(config: LonghaulConfig) -> InProcessService:
    return InProcessService(config, "verifier", run_verifier)


def service_env(config: LonghaulConfig, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a service subprocess reproducing ``config``'s relevant settings."""
    env = base_service_env()
    pipeline = config.pipeline
    env.update(
        {
            "LONGHAUL_NATS__URL": config.nats.url,
            "LONGHAUL_NATS__NAMESPACE": config.nats.namespace,
            "LONGHAUL_MODELS__DEFAULT": config.models.default,
            "LONGHAUL_MODELS__ROLES": msgspec.json.encode(config.models.roles).decode(),
            "LONGHAUL_PIPELINE__MAX_CONCURRENT_PHASES": str(pipeline.max_concurrent_phases),
            "LONGHAUL_PIPELINE__MAX_REPLAN_ATTEMPTS": str(pipeline.max_replan_attempts),
            "LONGHAUL_PIPELINE__CHECKPOINT__ENABLED": str(pipeline.checkpoint.enabled).lower(),
            "LONGHAUL_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


class PlannerProcess(ServiceProcess):
    """``python -m longhaul.planner.main`` as a real subprocess (for kill -9)."""

    def __init__(self, config: LonghaulConfig, log_dir: Path | str) -> None:
        super().__init__(
            "longhaul.planner.main",
            service_env(config),
            Path(log_dir) / f"planner-{new_id('p')}.log",
        )


def temp_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="lh-planner-")


# ------------------------------------------------------------------------------ step traces


@dataclass(frozen=True)
class Succeed:
    output: str
    tokens: int = 0
    """Prompt tokens its answer's model call reports (what a task's max_tokens counts)."""


@dataclass(frozen=True)
class Fail:
    error: str


@dataclass(frozen=True)
class RunUntilStopped:
    """Keep running until someone asks the trace to stop, then end ``stopped`` (as the
    executor does), having used ``tokens``."""

    tokens: int = 0


Outcome = Succeed | Fail | RunUntilStopped
Policy = Callable[[ev.TraceCreated, int], Awaitable[Outcome]]
"""Given a step trace's creation and how many traces its phase had before, what to do."""


async def succeed_with_phase_name(created: ev.TraceCreated, _earlier: int) -> Outcome:
    return Succeed(f"output of {created.phase_id}")


def failing(phase_id: str, times: int) -> Policy:
    """``phase_id``'s first ``times`` step traces fail; everything else succeeds."""

    async def policy(created: ev.TraceCreated, earlier: int) -> Outcome:
        if created.phase_id == phase_id and earlier < times:
            return Fail(f"{phase_id} broke (attempt {earlier + 1})")
        return await succeed_with_phase_name(created, earlier)

    return policy


@dataclass
class StepCompleter:
    """Ends step traces the way an executor would (answer + ``completed``, or ``failed``),
    as decided by ``policy``. Records every step trace it saw, per phase, in creation order."""

    conn: Connection
    store: EventStore
    policy: Policy = succeed_with_phase_name
    seen: dict[str, list[ev.TraceCreated]] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _sub: Any = None

    async def __aenter__(self) -> Self:
        subject = self.conn.names.type_filter("trace", "trace_created")
        self._sub = await self.conn.nc.subscribe(subject, cb=self._on_created)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._sub.unsubscribe()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _on_created(self, msg: Any) -> None:
        created = ev.decode(msg.data)
        if not isinstance(created, ev.TraceCreated) or created.phase_id is None:
            return
        earlier = self.seen.setdefault(created.phase_id, [])
        attempt = len(earlier)
        earlier.append(created)
        task = asyncio.create_task(self._finish(created, attempt))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, created: ev.TraceCreated, attempt: int) -> None:
        outcome = await self.policy(created, attempt)
        trace_id = created.aggregate_id
        if isinstance(outcome, RunUntilStopped):
            await fold_until(
                self.store,
                "trace",
                trace_id,
                TraceState(),
                lambda s: s.stop_requested,
                within=60,
                describe=lambda s: f"status {s.status}, stop_requested {s.stop_requested}",
            )
        # The created event reaches core subscribers as it is published, maybe before the
        # stream has stored it: fold until the trace is there.
        await fold_until(
            self.store,
            "trace",
            trace_id,
            TraceState(),
            lambda s: s.exists,
            within=30,
            describe=lambda s: "not stored",
        )
        state = await trace_state(self.store, trace_id)
        events: list[ev.TraceEvent]
        if isinstance(outcome, Succeed | RunUntilStopped):
            output = outcome.output if isinstance(outcome, Succeed) else "partial work"
            events = [
                ev.MessageAppended(
                    sequence=state.last_sequence + 1,
                    parent_sequence=state.head_sequence,
                    role="assistant",
                    content=output,
                    usage=Usage(prompt_tokens=outcome.tokens) if outcome.tokens else None,
                ),
                ev.Stopped(reason="user")
                if isinstance(outcome, RunUntilStopped)
                else ev.Completed(summary=output[:100]),
            ]
        else:
            events = [ev.Failed(error=outcome.error)]
        await self.store.append(
            "trace",
            trace_id,
            events,
            expected=Position(state.stream_seq, state.version),
            actor="test",
        )

    def trace_ids(self, phase_id: str) -> list[str]:
        return [c.aggregate_id for c in self.seen.get(phase_id, [])]


async def run_task(
    conn: Connection,
    store: EventStore,
    config: LonghaulConfig,
    phases: list[dict[str, Any]] | None,
    *,
    policy: Policy = succeed_with_phase_name,
    goal: str = "a goal",
    **options: Any,
) -> tuple[TaskState, StepCompleter]:
    """Create a task with ``phases`` (``None``: the planner plans) and wait for its end: an
    in-process planner on ``config``, step traces ended by a :class:`StepCompleter` following
    ``policy``."""
    completer = StepCompleter(conn, store, policy)
    async with completer, planner_service(config):
        task_id = await create_task(store, goal, phases=phases, **options)
        task = await wait_task(store, task_id)
    return task, completer
