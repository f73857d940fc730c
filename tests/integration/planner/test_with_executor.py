"""The planner with real step traces: an in-process executor runs every phase with a real
engine and scripted models, the real verifier checks answers, and the planner is a real
subprocess where it gets killed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from longhaul.core.config import LonghaulConfig
from longhaul.core.store import EventStore
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.config import (
    ModelsConfig,
    PipelineConfig,
    VerificationConfig,
    VerifierCommand,
    VerifierConfig,
)
from longhaul.domain.ids import new_id
from longhaul.domain.state import TaskState
from longhaul.planner.offload import SUMMARY_LIMIT, phase_output_key

from tests.integration.planner.support import (
    PlannerProcess,
    create_task,
    max_running,
    phase,
    planner_service,
    position,
    request_resume,
    task_events,
    temp_dir,
    verifier_service,
    wait_task,
)
from tests.support.folds import trace_state
from tests.support.stack import InProcessExecutor
from tests.support.stack import test_config as stack_test_config


def script(path: Path, *turns: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(list(turns)))
    return f"scripted:{path}"


def answer(text: str) -> dict[str, Any]:
    return {"content": text}


def read(key: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "workspace_read", "arguments": {"key": key}}]}


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


@pytest.fixture
def stack_config(nats_url: str, namespace: str) -> Any:
    def factory(
        *, max_reinjections: int = 1, checks: dict[str, str] | None = None, **pipeline: Any
    ) -> LonghaulConfig:
        return stack_test_config(
            nats_url,
            namespace,
            models=ModelsConfig(default="scripted:auto"),
            verifier=VerifierConfig(
                commands={
                    name: VerifierCommand(command=command)
                    for name, command in (checks or {}).items()
                }
            ),
            pipeline=PipelineConfig(
                verification=VerificationConfig(max_reinjections=max_reinjections), **pipeline
            ),
        )

    return factory


@pytest.fixture
async def executor(
    nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[InProcessExecutor]:
    async with InProcessExecutor(
        nats_url, namespace, settings={"working_root": tmp_path}
    ) as running:
        yield running


async def trace_of(store: EventStore, task: TaskState, phase_id: str) -> list[ev.Event]:
    [trace_id] = task.phases[phase_id].trace_ids
    return [r.event async for r in store.replay("trace", trace_id)]


async def test_diamond_with_real_step_traces(
    store: EventStore, stack_config: Any, executor: InProcessExecutor, tmp_path: Path
) -> None:
    task_id = new_id("task")
    long = "x" * 900  # longer than a summary: e must read it from the workspace

    def spec(pid: str, *deps: str) -> dict[str, Any]:
        turns = [read(phase_output_key(task_id, d)) for d in deps[:1]]
        model = script(tmp_path / f"{pid}.yaml", *turns, answer(f"result of {pid}: {long}"))
        return phase(pid, *deps, model=model)

    phases = [spec("a"), spec("b", "a"), spec("c", "a"), spec("d", "a"), spec("e", "b", "c", "d")]
    async with planner_service(stack_config(max_concurrent_phases=2)):
        await create_task(store, phases=phases, task_id=task_id)
        task = await wait_task(store, task_id)
    assert task.status == "completed", task.error
    events = await task_events(store, task_id)
    for middle in "bcd":
        assert position(events, ev.PhaseStarted, middle) > position(events, ev.PhaseCompleted, "a")
        assert position(events, ev.PhaseStarted, "e") > position(events, ev.PhaseCompleted, middle)
    assert max_running(events) == 2
    # Actual step traces alive at once, in stream order: never more than the limit.
    spans = []
    for pid in "abcde":
        [trace_id] = task.phases[pid].trace_ids
        seqs = {type(r.event): r.seq async for r in store.replay("trace", trace_id)}
        spans.append((seqs[ev.TraceCreated], seqs[ev.Completed]))
    assert max(sum(1 for s, e in spans if s <= point <= e) for point, _ in spans) <= 2
    # e got b's summary in its brief and read b's full output with workspace_read.
    trace = await trace_state(store, task.phases["e"].trace_ids[0])
    brief = str(trace.main_path()[0].content)
    assert task.phases["b"].summary in brief and len(task.phases["b"].summary) <= SUMMARY_LIMIT
    [tool_result] = [m for m in trace.main_path() if m.role == "tool"]
    assert f"result of b: {long}" in str(tool_result.content)
    entry = await WorkspaceStore(store.conn).get(phase_output_key(task_id, "e"))
    assert entry is not None and entry.value.decode() == f"result of e: {long}"


async def test_phase_failing_once_is_replanned_keeping_earlier_outputs(
    nats_url: str, namespace: str, store: EventStore, stack_config: Any, tmp_path: Path
) -> None:
    """Phase 3's answer fails its verification command the first time; with no
    reinjection allowed its step trace fails, the planner replans, the retry passes."""
    check = "test -f p3.marker || { touch p3.marker; exit 1; }"
    phases = [
        phase(
            f"p{n}",
            *([f"p{n - 1}"] if n > 1 else []),
            model=script(tmp_path / f"p{n}.yaml", answer(f"result of p{n}")),
            **({"verification": {"check": "p3_marker"}} if n == 3 else {}),
        )
        for n in range(1, 5)
    ]
    workspace = WorkspaceStore(store.conn)
    # the verifier runs the check where the executor placed the task: the same working root
    config = stack_config(max_reinjections=0, checks={"p3_marker": check}).model_copy(
        update={"working_root": tmp_path}
    )
    strict = InProcessExecutor(
        nats_url, namespace, "exec-strict", config=config, settings={"working_root": tmp_path}
    )
    async with strict, planner_service(config), verifier_service(config):
        # The check keeps its marker in the task's directory (its own, having no owner).
        task_id = new_id("task")
        home = tmp_path / "unowned" / task_id
        await create_task(store, phases=phases, task_id=task_id, working_dir=str(home))
        first = await wait_task(store, task_id, lambda t: bool(t.replans) or t.is_final)
        kept = {pid: await workspace.get(phase_output_key(task_id, pid)) for pid in ("p1", "p2")}
        task = await wait_task(store, task_id)
    assert task.status == "completed", task.error
    events = await task_events(store, task_id)
    [failed] = [e for e in events if isinstance(e, ev.PhaseFailed)]
    assert failed.phase_id == "p3" and "verification failed" in failed.error
    [replanned] = [e for e in events if isinstance(e, ev.Replanned)]
    assert replanned.kept == ["p1", "p2"]
    for pid in ("p1", "p2"):
        entry = await workspace.get(phase_output_key(task_id, pid))
        before = kept[pid]
        assert entry is not None and before is not None
        assert (entry.value, entry.revision) == (before.value, before.revision)
        assert task.phases[pid].trace_ids == first.phases[pid].trace_ids
        assert [type(e) for e in await trace_of(store, task, pid)].count(ev.Completed) == 1
    started = [e.phase_id for e in events if isinstance(e, ev.PhaseStarted)]
    assert started == ["p1", "p2", "p3", "p3", "p4"]


async def test_verification_failure_is_reinjected_then_passes(
    store: EventStore, stack_config: Any, executor: InProcessExecutor, tmp_path: Path
) -> None:
    check = "python3 -c \"import sys; sys.exit(0 if sys.stdin.read().strip() == 'second' else 1)\""
    model = script(tmp_path / "v.yaml", answer("first"), answer("second"))
    config = stack_config(checks={"second": check})
    async with planner_service(config), verifier_service(config):
        task_id = await create_task(
            store,
            phases=[phase("v", model=model, verification={"check": "second"})],
        )
        task = await wait_task(store, task_id)
    assert task.status == "completed", task.error
    events = await trace_of(store, task, "v")
    verdicts = [
        type(e) for e in events if isinstance(e, ev.VerificationPassed | ev.VerificationFailed)
    ]
    assert verdicts == [ev.VerificationFailed, ev.VerificationPassed]
    reinjected = [e for e in events if isinstance(e, ev.MessageAppended) and e.role == "user"]
    assert "did not pass verification" in str(reinjected[0].content)
    entry = await WorkspaceStore(store.conn).get(phase_output_key(task_id, "v"))
    assert entry is not None and entry.value == b"second"


@pytest.mark.parametrize(("count", "crash_at"), [(4, 3), (10, 7)])
async def test_planner_killed_mid_task_resumes_without_rerunning_phases(
    store: EventStore,
    stack_config: Any,
    executor: InProcessExecutor,
    tmp_path: Path,
    count: int,
    crash_at: int,
) -> None:
    gate = f"release-p{crash_at}"
    phases = []
    for n in range(1, count + 1):
        turns = [answer(f"result of p{n}")]
        if n == crash_at:  # this phase's agent waits until the test lets it go on
            turns.insert(0, bash(f"while [ ! -f {gate} ]; do sleep 0.02; done; echo go"))
        phases.append(
            phase(
                f"p{n}",
                *([f"p{n - 1}"] if n > 1 else []),
                tools=["bash"] if n == crash_at else [],
                model=script(tmp_path / f"p{n}.yaml", *turns),
            )
        )
    config = stack_config()
    crashing = f"p{crash_at}"
    with temp_dir() as logs:
        planner = await PlannerProcess(config, logs).start()
        try:
            task_id = await create_task(store, phases=phases)
            before = await wait_task(
                store,
                task_id,
                lambda t: crashing in t.phases and t.phases[crashing].status == "running",
                within=60,
            )
        finally:
            await planner.kill()  # SIGKILL while phase crash_at runs
        # The phase's bash waits in the task's directory (a task with no owner has its own).
        (tmp_path / "unowned" / task_id).mkdir(parents=True, exist_ok=True)
        (tmp_path / "unowned" / task_id / gate).touch()
        await request_resume(store, task_id)
        async with PlannerProcess(config, logs) as second:
            try:
                task = await wait_task(store, task_id, within=60)
            except TimeoutError:
                raise AssertionError(second.log_tail()) from None
    assert task.status == "completed", task.error
    events = await task_events(store, task_id)
    [resumed] = [e for e in events if isinstance(e, ev.Resumed)]
    assert resumed.skipped == [f"p{n}" for n in range(1, crash_at)]
    assert resumed.resumed_at == [crashing] and resumed.source == "checkpoint"
    started = [e.phase_id for e in events if isinstance(e, ev.PhaseStarted)]
    assert started == [f"p{n}" for n in range(1, count + 1)]  # nothing started twice
    for n in range(1, crash_at):
        pid = f"p{n}"
        assert task.phases[pid].trace_ids == before.phases[pid].trace_ids
        trace = await trace_state(store, task.phases[pid].trace_ids[0])
        assert trace.runs == 1 and trace.status == "completed"
