"""Two executor processes under load never run one trace at once: turns longer than the lease
TTL keep their lease by renewing it, so no trace is taken over while its runner lives."""

from __future__ import annotations

import asyncio
from pathlib import Path

from longhaul.core.store import EventStore

from tests.integration.executor.checks import assert_never_concurrent, executions
from tests.integration.executor.scripts import record_steps
from tests.support.stack import FAST_LEASE_TTL_S, create_trace, executor_processes, wait_for_trace

TRACES = 6
ENV = {
    "LONGHAUL_EXECUTOR__TOOL_MODULES": "tests.integration.executor.tooling",
    # Half the traces fill one replica, so the other must take the rest: an idle replica
    # would otherwise be free to grab all six wake-ups in one batch.
    "LONGHAUL_EXECUTOR__CONCURRENCY": str(TRACES // 2),
}
STEPS = 6
HOLD_MS = 400


async def test_two_executors_never_run_the_same_trace_at_once(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    assert STEPS * HOLD_MS / 1000 > FAST_LEASE_TTL_S  # each turn outlives one lease TTL
    log = tmp_path / "calls.jsonl"
    model = record_steps(tmp_path / "steps.yaml", STEPS, log, hold_ms=HOLD_MS)
    async with executor_processes(nats_url, namespace, 2, env=ENV):
        ids = [await create_trace(store, f"trace {n}", model=model) for n in range(TRACES)]
        states = await asyncio.gather(*(wait_for_trace(store, t, within=60) for t in ids))
    assert [s.status for s in states] == ["completed"] * TRACES
    runs = executions(log)
    assert_never_concurrent(runs)
    for trace_id in ids:
        pids = {run["pid"] for run in runs if run["trace"] == trace_id}
        assert len(pids) == 1, f"{trace_id} moved between executors while its runner lived"
    assert len({run["pid"] for run in runs}) == 2  # both replicas did work
