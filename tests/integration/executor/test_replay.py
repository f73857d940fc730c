"""The ``replay:<trace id>`` model through a real executor: a recorded run's turns play again
(its tools really run again, the model is not asked), and only for the key that owns the
recording — another key's trace, or one that does not exist, is refused alike."""

from __future__ import annotations

import json
from pathlib import Path

from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

from tests.integration.executor.scripts import record_steps
from tests.support.stack import InProcessExecutor, wait_for_trace

TOOLS = {"tool_modules": ["tests.integration.executor.tooling"]}
TASK = "do two steps"


async def _created(store: EventStore, model: str, owner: str) -> str:
    trace_id = new_id("t")
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content=TASK)],
        config=ev.TraceConfig(model=model),
        owner=owner,
    )
    await store.append("trace", trace_id, [created], expected=Position(), actor="test")
    return trace_id


def _steps(log: Path) -> list[int]:
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [int(line["step"]) for line in lines if line["phase"] == "start"]


async def test_a_replay_plays_the_record_for_its_owner_and_nobody_else(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    log = tmp_path / "steps.jsonl"
    model = record_steps(tmp_path / "script.yaml", 2, log, answer="both steps done")
    async with InProcessExecutor(nats_url, namespace, settings=TOOLS):
        recorded_id = await _created(store, model, owner="alice")
        recorded = await wait_for_trace(store, recorded_id)
        assert recorded.status == "completed", recorded.error
        # The script file goes: only the recording can answer the replay.
        (tmp_path / "script.yaml").unlink()

        replay_id = await _created(store, f"replay:{recorded_id}", owner="alice")
        replayed = await wait_for_trace(store, replay_id)
        assert replayed.status == "completed", replayed.error
        assert [m.role for m in replayed.main_path()] == [m.role for m in recorded.main_path()]
        assert replayed.main_path()[-1].content == "both steps done"
        assert _steps(log) == [0, 1, 0, 1]  # the tools ran again

        for owner, model_string in (
            ("mallory", f"replay:{recorded_id}"),
            ("alice", f"replay:{new_id('t')}"),
        ):
            refused = await wait_for_trace(store, await _created(store, model_string, owner))
            assert refused.status == "failed"
            assert refused.error is not None and "no recorded trace" in refused.error
        assert _steps(log) == [0, 1, 0, 1]
