"""Fallback chains and the shared circuit breaker, end to end: the gateway's HTTP API, a real
executor, and loopback fakes speaking OpenAI's and Anthropic's wire formats. OpenAI goes down
(503, a refused connection, a 429 asking to wait past the limit, a billing refusal); the
trace finishes on Anthropic with ``model_switched`` on its log and its conversation intact. A
400 (the request's own fault) does not fall through. Once the circuit is open, another trace
skips OpenAI without calling it (the fake counts its requests)."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from longhaul.cli.follow import Follower
from longhaul.client import AsyncClient
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.circuits import Circuit, decode, encode
from longhaul.domain.config import CircuitConfig, ModelsConfig
from longhaul.domain.state import TraceState
from rich.console import Console

from tests.integration.executor.served import gateway_and_executor
from tests.integration.gateway.test_health import samples
from tests.support.llm_fakes import Call, Fail, FakeAnthropic, FakeOpenAI, Reply
from tests.support.stack import test_config, wait_for_trace

SKIPPED = (("reason", "circuit_open"),)
PRIMARY = "openai:fake-model"
FALLBACK = "anthropic:fake-model"


def models(openai: FakeOpenAI, anthropic: FakeAnthropic, **circuit: Any) -> ModelsConfig:
    """OpenAI first (no retries: each outage is one request), Anthropic after it."""
    providers = {
        **openai.models_config(max_retries=0).providers,
        **anthropic.models_config().providers,
    }
    return ModelsConfig(default=PRIMARY, providers=providers, circuit=CircuitConfig(**circuit))


async def switches(store: EventStore, trace_id: str) -> list[ev.ModelSwitched]:
    return [
        r.event
        async for r in store.replay("trace", trace_id)
        if isinstance(r.event, ev.ModelSwitched)
    ]


async def run_trace(http: Any, store: EventStore, text: str, **body: Any) -> TraceState:
    created = await http.post(
        "/api/traces",
        json={"messages": [{"role": "user", "content": text}], "name": text, **body},
    )
    assert created.status_code == 202, created.text
    return await wait_for_trace(store, created.json()["trace_id"], within=30)


OUTAGES = {
    "server_error": Fail(503, "overloaded"),
    "rate_limited": Fail(429, "slow down", headers={"retry-after": "3600"}),
    "quota": Fail(429, "You exceeded your current quota, please check your plan and billing"),
}


@pytest.mark.parametrize("reason", sorted(OUTAGES))
async def test_an_outage_moves_the_trace_to_the_fallback_with_its_conversation(
    reason: str,
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    look = Reply(tool_calls=[Call("glob", {"pattern": "*.txt"})])
    async with (
        FakeOpenAI(script=[look, OUTAGES[reason]]) as openai,
        FakeAnthropic(script=[Reply(text="found notes.txt")]) as anthropic,
    ):
        config = test_config(nats_url, namespace, models=models(openai, anthropic))
        async with (
            gateway_and_executor(
                nats_config, config, tmp_path / "work", f"exec-fallback-{reason}"
            ) as gateway,
            gateway.client() as http,
        ):
            state = await run_trace(
                http, store, "list the notes", model=PRIMARY, model_fallback=[FALLBACK]
            )
            switched = await switches(store, state.trace_id)
            viewed = (await http.get(f"/api/traces/{state.trace_id}")).json()
            # the CLI's follow output (replayed from the start) prints the switch
            console = Console(record=True, width=200)
            async with AsyncClient(gateway.url) as client:
                await Follower(client, console).follow(state.trace_id)
    assert state.status == "completed", state.error
    assert [(s.from_model, s.to, s.reason) for s in switched] == [(PRIMARY, FALLBACK, reason)]
    assert state.model == FALLBACK
    # the viewer's transcript line comes from the trace's view: after the tool result
    assert viewed["model_switches"] == [
        {"from": PRIMARY, "to": FALLBACK, "reason": reason, "after_sequence": 3}
    ]
    assert f"model switched {PRIMARY} → {FALLBACK} ({reason})" in console.export_text()
    # nothing retried on the primary; the fallback saw the whole conversation, its tool call
    # and result paired in Anthropic's shape (the fake refuses unpaired ones)
    assert len(openai.requests) == 2
    assert len(anthropic.requests) == 1 and not anthropic.rejected
    sent = anthropic.requests[0].json["messages"]
    blocks = [b for m in sent if isinstance(m["content"], list) for b in m["content"]]
    assert "list the notes" in str(sent[0]["content"])
    assert [b["type"] for b in blocks if b["type"] in ("tool_use", "tool_result")] == [
        "tool_use",
        "tool_result",
    ]
    path = state.main_path()
    result = next(b for b in blocks if b["type"] == "tool_result")
    assert str(path[2].content) in str(result["content"])
    assert [m.role for m in path] == ["user", "assistant", "tool", "assistant"]
    assert (path[1].model, path[-1].model) == (PRIMARY, FALLBACK)
    assert path[-1].content == "found notes.txt"


async def test_a_refused_connection_falls_through_from_the_configured_chain(
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    """``models.fallback`` serves a trace that names no chain; the primary's port is closed."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    async with (
        FakeOpenAI() as openai,
        FakeAnthropic(script=[Reply(text="answered by the fallback")]) as anthropic,
    ):
        chain = models(openai, anthropic)
        chain.providers["openai"].base_url = f"http://127.0.0.1:{port}/v1"
        chain.fallback = [FALLBACK]
        config = test_config(nats_url, namespace, models=chain)
        async with (
            gateway_and_executor(
                nats_config, config, tmp_path / "work", "exec-fallback-connect"
            ) as gateway,
            gateway.client() as http,
        ):
            state = await run_trace(http, store, "say something")
            switched = await switches(store, state.trace_id)
    assert state.status == "completed", state.error
    assert [(s.to, s.reason) for s in switched] == [(FALLBACK, "connect")]
    assert state.main_path()[-1].content == "answered by the fallback"


async def test_a_bad_request_does_not_fall_through(
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    async with (
        FakeOpenAI(script=[Fail(400, "messages: invalid content")]) as openai,
        FakeAnthropic(default=Reply(text="should not be asked")) as anthropic,
    ):
        config = test_config(nats_url, namespace, models=models(openai, anthropic))
        async with (
            gateway_and_executor(
                nats_config, config, tmp_path / "work", "exec-fallback-400"
            ) as gateway,
            gateway.client() as http,
        ):
            state = await run_trace(
                http, store, "bad request", model=PRIMARY, model_fallback=[FALLBACK]
            )
            switched = await switches(store, state.trace_id)
    assert (state.status, state.stop_reason) == ("failed", "model_error")
    assert "invalid content" in (state.error or "")
    assert switched == [] and state.model is None
    assert anthropic.requests == []


async def test_an_open_circuit_is_skipped_without_a_call(
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    """Two outages open OpenAI's circuit (``failures: 2``); the third trace, on another
    executor, goes to the fallback without OpenAI hearing from it, and ``/readyz`` and
    ``/metrics`` name the open circuit."""
    async with (
        FakeOpenAI(default=Fail(503, "down")) as openai,
        FakeAnthropic(default=Reply(text="fallback answer")) as anthropic,
    ):
        chain = models(openai, anthropic, failures=2, window_s=600, open_s=600)
        config = test_config(nats_url, namespace, models=chain)
        async with (
            gateway_and_executor(
                nats_config, config, tmp_path / "work", "exec-circuit-a"
            ) as gateway,
            gateway.client() as http,
        ):
            for n in range(2):
                first = await run_trace(
                    http, store, f"trace {n}", model=PRIMARY, model_fallback=[FALLBACK]
                )
                assert first.status == "completed", first.error
            assert len(openai.requests) == 2
        async with (
            gateway_and_executor(
                nats_config, config, tmp_path / "work", "exec-circuit-b"
            ) as gateway,
            gateway.client() as http,
        ):
            skipped = await run_trace(
                http, store, "trace 3", model=PRIMARY, model_fallback=[FALLBACK]
            )
            switched = await switches(store, skipped.trace_id)
            ready = (await http.get("/readyz")).json()
            # the switch reaches the gateway's counter over the live subject (not the log)
            async with asyncio.timeout(20):
                while True:
                    values = samples((await http.get("/metrics")).text)
                    if values.get(("longhaul_model_switches_total", SKIPPED)):
                        break
                    await asyncio.sleep(0.05)
    assert values[("longhaul_provider_circuit_open", (("provider", "openai"),))] == 1
    assert values[("longhaul_model_switches_total", SKIPPED)] == 1
    assert skipped.status == "completed", skipped.error
    assert len(openai.requests) == 2  # not called again
    assert [(s.from_model, s.reason) for s in switched] == [(PRIMARY, "circuit_open")]
    assert ready["checks"]["circuits"] == "open: openai"


async def test_failed_attempts_open_the_circuit_while_a_call_still_retries(
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    store: EventStore,
    tmp_path: Path,
) -> None:
    """Each failed attempt counts, not each call that used up its retries: with five retries
    and ``failures: 2``, the running call stops after its second attempt and moves on, so a
    provider that goes down is not retried by every running trace in turn."""
    async with (
        FakeOpenAI(default=Fail(503, "down")) as openai,
        FakeAnthropic(default=Reply(text="fallback answer")) as anthropic,
    ):
        providers = {
            **openai.models_config(max_retries=5).providers,
            **anthropic.models_config().providers,
        }
        chain = ModelsConfig(
            default=PRIMARY,
            providers=providers,
            circuit=CircuitConfig(failures=2, window_s=600, open_s=600),
        )
        config = test_config(nats_url, namespace, models=chain)
        async with (
            gateway_and_executor(nats_config, config, tmp_path / "work", "exec-retries") as gw,
            gw.client() as http,
        ):
            state = await run_trace(
                http, store, "retries", model=PRIMARY, model_fallback=[FALLBACK]
            )
    assert state.status == "completed", state.error
    assert len(openai.requests) == 2  # not 1 + max_retries
    switched = await switches(store, state.trace_id)
    assert [(s.from_model, s.to, s.reason) for s in switched] == [
        (PRIMARY, FALLBACK, "circuit_open")
    ]


async def test_a_half_open_probe_closes_the_circuit_when_the_provider_is_back(
    nats_config: NatsConfig,
    nats_url: str,
    namespace: str,
    conn: Connection,
    store: EventStore,
    tmp_path: Path,
) -> None:
    """A circuit opened longer ago than ``open_s``: the next trace probes OpenAI, which
    answers again; the circuit closes and the trace stays on its model."""
    kv = await conn.kv(conn.names.circuits)
    await kv.put("openai", encode(Circuit(opened_at=time.time() - 120)))
    async with (
        FakeOpenAI(default=Reply(text="primary is back")) as openai,
        FakeAnthropic(default=Reply(text="fallback answer")) as anthropic,
    ):
        config = test_config(nats_url, namespace, models=models(openai, anthropic, open_s=60))
        async with (
            gateway_and_executor(
                nats_config, config, tmp_path / "work", "exec-circuit-probe"
            ) as gateway,
            gateway.client() as http,
        ):
            state = await run_trace(http, store, "probe", model=PRIMARY, model_fallback=[FALLBACK])
            ready = (await http.get("/readyz")).json()
    assert state.status == "completed", state.error
    assert state.main_path()[-1].content == "primary is back"
    assert len(openai.requests) == 1 and anthropic.requests == []
    assert decode((await kv.get("openai")).value).clean
    assert ready["checks"]["circuits"] == "ok"
