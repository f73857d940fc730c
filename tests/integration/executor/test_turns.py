"""Turns end to end: a real engine, a scripted model, an in-process executor, a real server."""

from __future__ import annotations

import json
from pathlib import Path

from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore

from tests.integration.executor.scripts import record_steps
from tests.support.stack import InProcessExecutor, create_trace, wait_for_trace

TOOLS = {"tool_modules": ["tests.integration.executor.tooling"]}


def log_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_scripted_trace_runs_to_completion(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    model = record_steps(tmp_path / "script.yaml", 3, log)
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS) as ex:
        trace_id = await create_trace(store, "do three steps", model=model)
        state = await wait_for_trace(store, trace_id)
        assert ex.executor.metrics.steps._value.get() == 4
    assert state.status == "completed", state.error
    roles = [m.role for m in state.main_path()]
    assert roles == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    starts = [line for line in log_lines(log) if line["phase"] == "start"]
    calls = [m for m in state.main_path() if m.role == "tool"]
    assert [s["key"] for s in starts] == [f"{trace_id}:{m.tool_call_id}" for m in calls]
    entry = await TraceIndex(store.conn).get(trace_id)
    assert entry is not None and entry.status == "completed"
    assert entry.last_event_seq == state.stream_seq
