"""Loop detection through the gateway and a running executor, the model's requests read on
the wire: a repeated call's warning rides at the end of the next request of its run, a
warning queued when a run ends (here: its iteration budget) never reaches the next run, and
the third identical call stops the trace with ``loop_detected``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore

from tests.integration.executor.served import gateway_and_executor
from tests.support.llm_fakes import Call, FakeOpenAI, Reply
from tests.support.stack import test_config, wait_for_trace

WARNING = "You are repeating glob"


def glob(pattern: str) -> Reply:
    return Reply(tool_calls=[Call("glob", {"pattern": pattern})])


def warned(request: dict[str, Any]) -> bool:
    """The warning is in the request, after the last tool result (never between a call and
    its results; only the volatile ``<context>`` note may follow it)."""
    messages = request["messages"]
    results = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    after = messages[results[-1] + 1 :] if results else messages
    return any(m["role"] == "user" and WARNING in str(m["content"]) for m in after)


async def test_a_warning_rides_in_its_own_run_only_and_the_third_repeat_stops(
    nats_config: NatsConfig, nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    # run 1 (4 model calls at most): x, x (warned), z, z (warned: then the budget ends it);
    # run 2: q, q (warned), q (stopped).
    script = [glob("x"), glob("x"), glob("z"), glob("z"), glob("q"), glob("q"), glob("q")]
    async with FakeOpenAI(script=script) as fake:
        config = test_config(nats_url, namespace, models=fake.models_config())
        async with gateway_and_executor(
            nats_config, config, tmp_path / "work", "exec-loops"
        ) as gateway:
            async with gateway.client() as http:
                created = await http.post(
                    "/api/traces",
                    json={
                        "messages": [{"role": "user", "content": "look around"}],
                        "model": "openai:fake-model",
                        "tools": ["glob"],
                        "max_iterations": 4,
                        "name": "loops",  # named: no title is asked of the model
                    },
                )
                assert created.status_code == 202, created.text
                trace_id = created.json()["trace_id"]
                first = await wait_for_trace(store, trace_id, within=20)
                assert (first.status, first.stop_reason) == ("stopped", "max_iterations")
                again = await http.post(
                    f"/api/traces/{trace_id}/run",
                    json={"messages": [{"role": "user", "content": "go on"}]},
                )
                assert again.status_code == 202, again.text
                second = await wait_for_trace(
                    store, trace_id, lambda s: s.runs == 2 and s.is_final, within=20
                )
                trace = (await http.get(f"/api/traces/{trace_id}")).json()
    requests = [r.json for r in fake.requests]
    assert len(requests) == 7 and not fake.rejected
    # in run 1 each warning is at the end of the request after the repeat
    assert [warned(r) for r in requests[:4]] == [False, False, True, False]
    # the warning queued by the 4th call was not carried into run 2's first request…
    assert any("go on" in str(m["content"]) for m in requests[4]["messages"][-2:])
    assert not any(WARNING in str(m["content"]) for m in requests[4]["messages"])
    # …where the window starts afresh: q twice is warned, the third q stops the trace
    assert [warned(r) for r in requests[4:]] == [False, False, True]
    assert (second.status, second.stop_reason) == ("stopped", "loop_detected")
    assert (trace["status"], trace["stop_reason"]) == ("stopped", "loop_detected")
    assert second.pending_warnings == []
