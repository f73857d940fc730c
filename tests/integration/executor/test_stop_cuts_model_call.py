"""A stop acts at once, even mid model call: through the gateway and a running executor, a
model on a real loopback server (OpenAI's streaming wire) that streams a few deltas and then
holds the stream open. The stop ends the trace while the model still holds the stream: the
executor cancelled the call and closed the connection rather than waiting it out."""

from __future__ import annotations

import asyncio
from pathlib import Path

from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore

from tests.integration.executor.served import gateway_and_executor
from tests.support.llm_fakes import FakeOpenAI, Hold, Reply
from tests.support.stack import test_config, wait_for_trace


async def test_a_stop_cancels_the_model_call_and_the_trace_continues_intact(
    nats_config: NatsConfig, nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    hold = Hold()
    async with FakeOpenAI(script=[hold, Reply(text="fine, done")]) as fake:
        config = test_config(nats_url, namespace, models=fake.models_config())
        async with gateway_and_executor(
            nats_config, config, tmp_path / "work", "exec-stop-mid-call"
        ) as gateway:
            async with gateway.client() as http:
                created = await http.post(
                    "/api/traces",
                    json={
                        "messages": [{"role": "user", "content": "ramble on"}],
                        "model": "openai:fake-model",
                        "name": "rambling",  # named: no title is asked of the model
                    },
                )
                assert created.status_code == 202, created.text
                trace_id = created.json()["trace_id"]
                await asyncio.wait_for(hold.streaming.wait(), 20)
                stopped = await http.post(f"/api/traces/{trace_id}/stop")
                assert stopped.status_code < 300, stopped.text
                state = await wait_for_trace(store, trace_id, within=20)
                # the model never ended its stream: the client went away
                await asyncio.wait_for(hold.client_gone.wait(), 10)
                again = await http.post(
                    f"/api/traces/{trace_id}/run",
                    json={"messages": [{"role": "user", "content": "just answer"}]},
                )
                assert again.status_code == 202, again.text
                second = await wait_for_trace(
                    store, trace_id, lambda s: s.runs == 2 and s.is_final, within=20
                )
    assert (state.status, state.stop_reason) == ("stopped", "stop_requested")
    # no half answer recorded as if complete, nothing unanswered, nothing twice
    assert [m.role for m in state.main_path()] == ["user"]
    assert sorted(second.messages) == list(range(1, second.last_sequence + 1))
    assert second.status == "completed", second.error
    assert [m.role for m in second.main_path()] == ["user", "user", "assistant"]
    assert second.main_path()[-1].content == "fine, done"
    assert not second.unanswered_tool_calls()
    # the continuation's request carries no trace of the cut-off answer
    assert len(fake.requests) == 2 and not fake.rejected
    sent = fake.requests[1].json["messages"]
    said = [m["content"] for m in sent if m["role"] == "user" and "<context>" not in m["content"]]
    assert said == ["ramble on", "just answer"]
    assert [m["role"] for m in sent if m["role"] not in ("system", "user")] == []
    assert not any(hold.text[:8] in str(m.get("content")) for m in sent)
