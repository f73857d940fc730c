"""``kill -9`` of the executor running a ``bash`` call: the call's effects stay in the trace's
sandbox, so the survivor settles it without a person — the model is told it was cut off, its
outcome unknown, no output kept — and the command is not run again."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore
from longhaul.domain import events as ev

from tests.integration.executor.scripts import write_script
from tests.support.stack import (
    ExecutorProcess,
    create_trace,
    eventually,
    executor_processes,
    scratch_working_root,
    wait_for_trace,
)


def _lines(root: Path, name: str) -> list[str]:
    return [line for found in root.rglob(name) for line in found.read_text().splitlines()]


async def test_kill_9_mid_bash_is_settled_by_telling_the_model(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    command = "echo start >> ran.log; sleep 30; echo end >> ran.log"
    model = write_script(
        tmp_path / "bash.yaml",
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
            {"content": "inspected, carried on"},
        ],
    )
    root = scratch_working_root(namespace)
    async with executor_processes(nats_url, namespace, 2) as procs:
        by_actor = {f"executor:{p.executor_id}": p for p in procs}
        trace_id = await create_trace(store, "run a long command", model=model)

        async def started() -> bool:
            return _lines(root, "ran.log") == ["start"]

        await eventually(started, within=60)
        events = [r.event async for r in store.replay("trace", trace_id)]
        assert any(isinstance(e, ev.EffectStarted) for e in events)
        victim: ExecutorProcess = by_actor[events[-1].actor]
        await victim.kill()
        state = await wait_for_trace(store, trace_id, within=90)

    assert state.status == "completed", state.error  # no person was asked
    [result] = [m for m in state.main_path() if m.role == "tool"]
    assert result.error_code == "cut_off"
    assert "cut off" in str(result.content) and "outcome is unknown" in str(result.content)
    assert "none of its output was kept" in str(result.content)
    [effect] = state.ledger.effects.values()
    assert [r.resolution for r in effect.resumed] == ["told_model"]
    assert _lines(root, "ran.log") == ["start"]  # run once, never again
    events = [r.event async for r in store.replay("trace", trace_id)]
    assert not any(isinstance(e, ev.Waiting) and e.reason == "approval" for e in events)
