"""The whole stack against a real llama.cpp server: gateway -> executor -> provider -> server.

The tool calls here are the server's own: SmolLM2-135M picks the tool and writes the
arguments (constrained by llama.cpp's grammar to the tools' schemas), llama.cpp parses them
into OpenAI ``tool_calls`` / Anthropic ``tool_use`` blocks, longhaul runs them and sends the
results back, and the server accepts the history (every request answered 200).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.state import Message, TraceState

from tests.integration.gateway.harness import RunningGateway
from tests.real_model.conftest import real_stack
from tests.support.llama import SteeringProxy
from tests.support.stack import ExecutorProcess, InProcessExecutor, test_config, wait_for_trace

pytestmark = pytest.mark.real_model

WITHIN_S = 150.0
TASK = "Write the word hello into notes.txt, then read notes.txt back."
PARAMS = {"temperature": 0, "seed": 7, "max_tokens": 64}


def main_path(state: TraceState) -> list[Message]:
    return state.main_path()


def assert_paired(messages: list[Message]) -> list[Message]:
    """Every call has exactly one result right after its assistant turn; returns the
    assistant messages that called tools."""
    calling = [m for m in messages if m.role == "assistant" and m.tool_calls]
    for index, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        ids = [call.id for call in message.tool_calls]
        results = []
        for follower in messages[index + 1 :]:
            if follower.role != "tool":
                break
            results.append(follower.tool_call_id or "")
        assert sorted(results) == sorted(ids), (ids, results)
    return calling


def trace_requests(proxy: SteeringProxy, first: int) -> list[Any]:
    return proxy.seen[first:]


async def start(gateway: RunningGateway, model: str, **extra: Any) -> str:
    body = {
        "messages": [{"role": "user", "content": TASK}],
        # named: an unnamed trace asks the utility model for a title when its run ends
        "name": "real stack",
        "model": model,
        "tools": ["write", "read"],
        "max_iterations": 5,
        "model_params": PARAMS,
        **extra,
    }
    async with gateway.client() as client:
        response = await client.post("/api/traces", json=body)
    assert response.status_code == 202, response.text
    trace_id: str = response.json()["trace_id"]
    return trace_id


async def run(gateway: RunningGateway, trace_id: str, body: dict[str, Any]) -> None:
    async with gateway.client() as client:
        response = await client.post(f"/api/traces/{trace_id}/run", json=body)
    assert response.status_code == 202, response.text


async def finished_after(store: EventStore, trace_id: str, last: int) -> TraceState:
    return await wait_for_trace(
        store, trace_id, lambda s: s.is_final and s.last_sequence > last, within=WITHIN_S
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_real_server_tool_calls_run_over_several_steps(
    provider: str,
    nats_config: NatsConfig,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
    proxy: SteeringProxy,
) -> None:
    first = len(proxy.seen)
    async with real_stack(nats_config, namespace, tmp_path, proxy, steer_rounds=2) as gateway:
        trace_id = await start(gateway, f"{provider}:smollm2")
        state = await finished_after(store, trace_id, 0)

    seen = trace_requests(proxy, first)
    assert not [s for s in seen if s.status >= 400], [(s.status, s.error, s.body) for s in seen]
    path = main_path(state)
    calling = assert_paired(path)
    assert len(calling) >= 2, [m.to_openai() for m in path]  # two steered rounds, both called
    calls = [call for message in calling for call in message.tool_calls or ()]
    assert {call.function.name for call in calls} <= {"write", "read"}
    results = {m.tool_call_id: m for m in path if m.role == "tool"}
    for message in calling:  # the model's own arguments: run, or refused if cut by max_tokens
        for call in message.tool_calls or ():
            try:
                json.loads(call.function.arguments)
            except json.JSONDecodeError:
                # the real server says `length` when max_tokens cuts the arguments: never run
                cut = message.finish_reason == "length"
                expected = "truncated" if cut else "tool_call_invalid"
                assert results[call.id].error_code == expected, (message, results[call.id])
    assert state.status == "completed", (state.status, state.error, state.stop_reason)
    assert path[-1].role == "assistant" and not path[-1].tool_calls
    # the wire format of the provider, with the trace's model_params on every request
    expected_path = "v1/chat/completions" if provider == "openai" else "v1/messages"
    assert {s.path for s in seen} == {expected_path}
    assert [s.steered for s in seen][:2] == [True, True] and not seen[-1].steered
    assert all(s.body.get("temperature") == 0 for s in seen)
    assert all(s.body.get("max_tokens") == 64 for s in seen)
    if provider == "openai":
        assert all(s.body.get("seed") == 7 for s in seen)
    assert state.config.model_params == ev.ModelParams(temperature=0, seed=7, max_tokens=64)
    totals = state.totals
    assert totals.prompt_tokens > 0 and totals.completion_tokens > 0
    # llama.cpp reuses the common prompt prefix of the previous step: reported as cached
    assert totals.cache_read_tokens > 0


async def test_rewind_regenerate_continue_and_a_move_to_anthropic(
    nats_config: NatsConfig,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
    proxy: SteeringProxy,
) -> None:
    async with real_stack(nats_config, namespace, tmp_path, proxy, steer_rounds=1) as gateway:
        trace_id = await start(gateway, "openai:smollm2")
        state = await finished_after(store, trace_id, 0)
        assert state.status == "completed", state.error
        first_path = main_path(state)
        user = first_path[0].sequence if first_path[0].role == "user" else first_path[1].sequence
        server_ids = [c.id for m in assert_paired(first_path) for c in m.tool_calls or ()]
        assert server_ids

        # continue on anthropic: the same history goes over /v1/messages, ids rewritten
        mark = len(proxy.seen)
        await run(
            gateway,
            trace_id,
            {
                "messages": [{"role": "user", "content": "Now read notes.txt again."}],
                "model": "anthropic:smollm2",
            },
        )
        state = await finished_after(store, trace_id, state.last_sequence)
        moved = proxy.seen[mark:]
        assert moved and {s.path for s in moved} == {"v1/messages"}
        assert not [s for s in moved if s.status >= 400]
        blocks = [
            b
            for m in moved[0].body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
        ]
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert uses and sorted(uses) == sorted(results)
        assert all(i.startswith("toolu_") for i in uses)
        assert state.status == "completed", state.error
        assert state.config.model == "anthropic:smollm2"
        assert main_path(state)[: len(first_path)] == first_path

        # regenerate the first answer: a new branch under the first user message
        before = state.last_sequence
        await run(gateway, trace_id, {"after_sequence": user})
        state = await finished_after(store, trace_id, before)
        regenerated = main_path(state)
        assert state.status == "completed", state.error
        assert regenerated[0].sequence <= user < regenerated[-1].sequence
        assert all(m.sequence > before for m in regenerated if m.sequence > user)
        assert_paired(regenerated)

        # rewind to the first answer's tool results with a new instruction
        anchor = first_path[-2].sequence  # the last tool result of the first run
        before = state.last_sequence
        await run(
            gateway,
            trace_id,
            {"messages": [{"role": "user", "content": "Say done."}], "after_sequence": anchor},
        )
        state = await finished_after(store, trace_id, before)
        rewound = main_path(state)
        assert [m.sequence for m in rewound if m.sequence <= anchor] == [
            m.sequence for m in first_path if m.sequence <= anchor
        ]
        assert rewound[-1].sequence > before
        assert_paired(rewound)
    assert not proxy.refused(), [(s.path, s.status) for s in proxy.refused()]


async def test_executor_killed_while_the_real_server_streams(
    nats_config: NatsConfig,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
    proxy: SteeringProxy,
) -> None:
    from tests.integration.gateway.harness import gateway_config, serve_gateway

    first = len(proxy.seen)
    env = {
        "OPENAI_BASE_URL": proxy.base_url(1, openai=True),
        "LONGHAUL_EXECUTOR__WORKING_ROOT": str(tmp_path),
    }
    async with serve_gateway(gateway_config(nats_config)) as gateway:
        async with ExecutorProcess(nats_config.url, namespace, "exec-doomed", env=env) as doomed:
            trace_id = await start(
                gateway, "openai:smollm2", model_params={**PARAMS, "max_tokens": 96}
            )
            live = await store.conn.nc.subscribe(store.conn.names.live(trace_id))
            await live.next_msg(timeout=WITHIN_S)  # the server is streaming to the executor
            await doomed.kill()
            await live.unsubscribe()
            assert not doomed.running
        mid = [r.event async for r in store.replay("trace", trace_id)]
        assert not any(isinstance(e, ev.Completed | ev.Failed) for e in mid)
        config = test_config(nats_config.url, namespace, models=_openai_only(proxy))
        async with InProcessExecutor(
            nats_config.url,
            namespace,
            "exec-heir",
            config=config,
            settings={"working_root": tmp_path},
        ):
            state = await finished_after(store, trace_id, 0)

    assert state.status == "completed", (state.status, state.error)
    assert_paired(main_path(state))
    finished = [r.event async for r in store.replay("trace", trace_id)][-1]
    assert isinstance(finished, ev.Completed) and "exec-heir" in finished.actor, finished
    seen = proxy.seen[first:]
    assert len(seen) >= 2 and not [s for s in seen if s.status >= 400]


def _openai_only(proxy: SteeringProxy) -> Any:
    from tests.real_model.conftest import real_models

    return real_models(proxy, 1)


async def test_max_tokens_and_seed_reach_the_real_server(proxy: SteeringProxy) -> None:
    """Direct calls through both providers: a 5-token cap ends the stream on length."""
    from longhaul.llm.registry import ModelRegistry
    from longhaul.llm.types import ModelRequest

    from tests.real_model.conftest import real_models

    async with ModelRegistry(real_models(proxy, 0), env={}) as registry:
        for provider in ("openai", "anthropic"):
            model = registry.resolve(f"{provider}:smollm2")
            short = await model.complete(
                ModelRequest(
                    model=model.name,
                    messages=[{"role": "user", "content": "Tell me a story."}],
                    max_tokens=5,
                    temperature=0,
                    seed=1,
                )
            )
            assert short.finish_reason == "length", (provider, short)
            assert 0 < short.usage.completion_tokens <= 5
