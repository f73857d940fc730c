"""Crash safety with real executor processes: ``kill -9`` mid-trace, a survivor finishes it."""

from __future__ import annotations

import itertools
import json
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from longhaul.core import events as ev
from longhaul.core.state import TraceState
from longhaul.core.store import EventStore

from tests.integration.executor.scripts import record_steps
from tests.support.stack import (
    ExecutorProcess,
    create_trace,
    executor_processes,
    wait_for_trace,
)

STEPS = 30
TOOLS = {"LONGHAUL_EXECUTOR__TOOL_MODULES": "tests.integration.executor.tooling"}


def executions(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def assert_tree_intact(state: TraceState, steps: int) -> None:
    """No lost, duplicated or unpaired message."""
    assert sorted(state.messages) == list(range(1, state.last_sequence + 1))
    parents = [None, *state.path[:-1]]
    assert [m.parent_sequence for m in state.main_path()] == parents
    # The engine's periodic context reminders are the only other messages on the path.
    path = [m for m in state.main_path() if not (m.synthetic and m.name == "context")]
    assert [m.role for m in path] == ["user"] + ["assistant", "tool"] * steps + ["assistant"]
    recorded_steps = []
    for assistant, result in zip(path[1:-1:2], path[2:-1:2], strict=True):
        assert assistant.tool_calls and len(assistant.tool_calls) == 1
        assert result.tool_call_id == assistant.tool_calls[0].id
        recorded_steps.append(json.loads(assistant.tool_calls[0].function.arguments)["step"])
    assert recorded_steps == list(range(steps))
    answered = [m.tool_call_id for m in state.messages.values() if m.role == "tool"]
    assert len(answered) == len(set(answered)), "a tool call answered twice"


def assert_never_concurrent(runs: list[dict[str, Any]], killed_pid: int, killed_at: float) -> None:
    """Executions of one trace by different processes never overlap in time."""
    spans: dict[tuple[str, int], list[float]] = {}
    for run in runs:
        key = (run["key"], run["pid"])
        spans.setdefault(key, [run["t"], killed_at if run["pid"] == killed_pid else run["t"]])
        spans[key][1] = run["t"] if run["phase"] == "end" else spans[key][1]
    intervals = sorted((start, end, pid) for (_, pid), (start, end) in spans.items())
    for (_s1, e1, p1), (s2, _e2, p2) in itertools.pairwise(intervals):
        assert p1 == p2 or e1 <= s2, f"pid {p1} ran until {e1}, pid {p2} started at {s2}"


async def test_kill_9_mid_trace_and_a_second_executor_finishes_it(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    seed = time.time_ns()
    rng = random.Random(seed)
    kill_after = rng.randrange(2, STEPS - 2)
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
    assert_never_concurrent(runs, victim_pid, killed_at)
    survivor_pids = {run["pid"] for run in runs} - {victim_pid}
    assert survivor_pids, f"{context}: the survivor ran no step"
