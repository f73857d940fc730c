"""Crash safety with real executor processes: ``kill -9`` mid-trace, a survivor finishes it."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from pathlib import Path

import pytest
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState

from tests.integration.executor.checks import (
    assert_never_concurrent,
    assert_tree_intact,
    executions,
    step_started,
)
from tests.integration.executor.scripts import record_steps
from tests.support.stack import (
    ExecutorProcess,
    create_trace,
    executor_processes,
    wait_for_trace,
)

STEPS = 30
STRUCK_HOLD_MS = 3000
"""How long the read-only call struck at runs (killed ~0.1 s in; only a re-run waits it out)."""
LAST_KILL = STEPS - 10
"""The latest step killed at: ten 40 ms steps left keep the trace running while the test reads
its log to find the runner and kills it, however slow the box (two were not always enough)."""
TOOLS = {"LONGHAUL_EXECUTOR__TOOL_MODULES": "tests.integration.executor.tooling"}


async def test_kill_9_mid_trace_and_a_second_executor_finishes_it(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    seed = time.time_ns()
    rng = random.Random(seed)
    kill_after = rng.randrange(2, LAST_KILL)
    mid_tool = rng.random() < 0.5  # right after the assistant message, or after the result
    log = tmp_path / "calls.jsonl"
    model = record_steps(tmp_path / "steps.yaml", STEPS, log, hold_ms=40)
    context = f"seed={seed} kill_after={kill_after} mid_tool={mid_tool}"
    async with executor_processes(nats_url, namespace, 2, env=TOOLS) as procs:
        by_actor = {f"executor:{p.executor_id}": p for p in procs}
        trace_id = await create_trace(store, "thirty steps", model=model)
        role = "assistant" if mid_tool else "tool"

        def reached(state: TraceState) -> bool:
            return sum(1 for m in state.main_path() if m.role == role) > kill_after

        await wait_for_trace(store, trace_id, reached, within=60)
        last = [r.event async for r in store.replay("trace", trace_id)][-1]
        victim: ExecutorProcess = by_actor[last.actor]
        assert victim.pid is not None
        victim_pid = victim.pid
        await victim.kill()
        killed_at = time.time()
        state = await wait_for_trace(store, trace_id, within=60)
    assert state.status == "completed", f"{context}: {state.error}"
    assert_tree_intact(state, STEPS)
    events = [r.event async for r in store.replay("trace", trace_id)]
    finisher = next(e.actor for e in events if isinstance(e, ev.Completed))
    assert finisher != victim.executor_id and finisher in by_actor, context

    runs = executions(log)
    keys_by_step: dict[int, set[str]] = defaultdict(set)
    starts_by_step: dict[int, int] = defaultdict(int)
    for run in runs:
        if run["phase"] == "start":
            keys_by_step[run["step"]].add(run["key"])
            starts_by_step[run["step"]] += 1
    assert all(count <= 2 for count in starts_by_step.values()), context
    assert all(len(keys) == 1 for keys in keys_by_step.values()), context  # same key on retry
    assert_never_concurrent(runs, {victim_pid: killed_at})
    survivor_pids = {run["pid"] for run in runs} - {victim_pid}
    assert survivor_pids, f"{context}: the survivor ran no step"


@pytest.mark.parametrize("atomic", [False, True], ids=["one_by_one", "atomic_batches"])
async def test_kill_9_while_read_only_calls_run_ahead_of_their_message(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path, atomic: bool
) -> None:
    """``observe`` is read-only, so it acts while the assistant message asking for it is still
    being appended (write-behind), or, with atomic batches, held to go with its result in one
    batch. Killed mid-trace, the survivor finishes with an intact tree: a call whose message
    did not land is asked for again (a new call, at most one more run of the step), never
    answered twice, never run by two executors at once."""
    seed = time.time_ns()
    kill_after = random.Random(seed).randrange(2, LAST_KILL)
    log = tmp_path / "calls.jsonl"
    # The struck step holds long enough for the kill to land inside it, however slow the box:
    # struck between steps, the runner could have a message landed and its call not begun,
    # which the survivor answers as interrupted, a step the scripted model never asks again.
    model = record_steps(
        tmp_path / "steps.yaml",
        STEPS,
        log,
        hold_ms=40,
        tool="observe",
        held={kill_after: STRUCK_HOLD_MS},
    )
    context = f"seed={seed} kill_after={kill_after} atomic={atomic}"
    env = {**TOOLS, "LONGHAUL_NATS__ATOMIC_BATCHES": str(atomic).lower()}
    async with executor_processes(nats_url, namespace, 2, env=env) as procs:
        trace_id = await create_trace(store, "thirty steps", model=model)
        started = await step_started(log, kill_after, within=60)
        [victim] = [p for p in procs if p.pid == started["pid"]]
        victim_pid = started["pid"]
        await victim.kill()  # mid-call, the call possibly ahead of its message
        killed_at = time.time()
        state = await wait_for_trace(store, trace_id, within=60)
    assert state.status == "completed", f"{context}: {state.error}"
    assert_tree_intact(state, STEPS)
    runs = executions(log)
    starts_by_step: dict[int, int] = defaultdict(int)
    for run in runs:
        if run["phase"] == "start":
            starts_by_step[run["step"]] += 1
    assert sorted(starts_by_step) == list(range(STEPS)), context
    assert all(count <= 2 for count in starts_by_step.values()), context
    assert_never_concurrent(runs, {victim_pid: killed_at})
    assert {run["pid"] for run in runs} - {victim_pid}, f"{context}: the survivor ran no step"
    conn = store.conn
    seqs = [r.seq async for r in store.replay("trace", trace_id)]
    headers = [(await conn.js.get_msg(conn.names.stream, seq)).headers or {} for seq in seqs]
    committed = sum(1 for h in headers if h.get("Nats-Batch-Commit") == "1")
    assert (committed > 0) == atomic, context  # the executors appended as configured


async def test_kill_9_mid_run_hands_out_no_fresh_iteration_budget(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    """max_iterations 5, the executor killed -9 after the 2nd model call: the survivor takes
    over with what the log says was used, so the run calls the model 5 times in all."""
    log = tmp_path / "calls.jsonl"
    model = record_steps(tmp_path / "steps.yaml", STEPS, log, hold_ms=200)
    async with executor_processes(nats_url, namespace, 2, env=TOOLS) as procs:
        by_actor = {f"executor:{p.executor_id}": p for p in procs}
        trace_id = await create_trace(store, "thirty steps", model=model, max_iterations=5)

        def second_call(state: TraceState) -> bool:
            return sum(1 for m in state.main_path() if m.role == "assistant") >= 2

        await wait_for_trace(store, trace_id, second_call, within=60)
        last = [r.event async for r in store.replay("trace", trace_id)][-1]
        victim = by_actor[last.actor]
        await victim.kill()  # mid-tool: the record call holds 200 ms
        state = await wait_for_trace(store, trace_id, within=60)
    assert state.status == "stopped" and state.stop_reason == "max_iterations"
    events = [r.event async for r in store.replay("trace", trace_id)]
    calls = [m for m in state.all_messages() if m.role == "assistant" and not m.synthetic]
    assert len(calls) == 5
    [stopped] = [e for e in events if isinstance(e, ev.Stopped)]
    assert stopped.used is not None and stopped.used.iterations == 5
    assert stopped.actor != last.actor  # the survivor stopped it
    assert state.unanswered_tool_calls() == []
    assert len({run["step"] for run in executions(log) if run["phase"] == "start"}) <= 5
