"""Graceful shutdown: SIGTERM stops fetching, cancels the turn after the grace period, releases
the lease at once and hands the wake-up back, so another replica continues without waiting
for a TTL."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore
from longhaul.domain.state import TraceState
from longhaul.executor.leases import Leases

from tests.integration.executor.checks import assert_tree_intact
from tests.integration.executor.scripts import record_steps
from tests.support.stack import create_trace, executor_processes, presence_key, wait_for_trace

STEPS = 12
ENV = {
    "LONGHAUL_EXECUTOR__TOOL_MODULES": "tests.integration.executor.tooling",
    "LONGHAUL_EXECUTOR__SHUTDOWN_GRACE_S": "0.2",
    "LONGHAUL_STORE__LEASE_TTL_S": "30",
}


async def test_sigterm_releases_leases_and_another_executor_continues(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "steps.yaml", STEPS, tmp_path / "calls.jsonl", hold_ms=100)
    async with executor_processes(nats_url, namespace, 2, env=ENV) as procs:
        by_actor = {f"executor:{p.executor_id}": p for p in procs}
        trace_id = await create_trace(store, "twelve steps", model=model)

        def started(state: TraceState) -> bool:
            return sum(1 for m in state.main_path() if m.role == "tool") >= 3

        await wait_for_trace(store, trace_id, started)
        last = [r.event async for r in store.replay("trace", trace_id)][-1]
        runner = by_actor[last.actor]
        code = await runner.stop()
        leases = Leases(store.conn, "probe", 30)
        holder = await leases.holder(Leases.trace_key(trace_id))
        presence = await leases.holder(presence_key(runner.executor_id))
        # With a 30 s TTL, only a release (not an expiry) can have freed the lease by now.
        assert code == 0 and holder != runner.executor_id and presence is None
        state = await wait_for_trace(store, trace_id, within=60)
    assert state.status == "completed", state.error
    assert_tree_intact(state, STEPS)
