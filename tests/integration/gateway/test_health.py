"""Probes and metrics."""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
from pathlib import Path

import httpx
import msgspec
import pytest
from longhaul.agent.contract import LiveUpdate
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.core.config import NatsConfig
from longhaul.core.logs import JsonFormatter
from longhaul.core.nats_server import NatsServer
from longhaul.core.store import EventStore
from longhaul.domain.config import SandboxConfig
from nats.js import api
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.stack import FAST_LEASE_TTL_S, InProcessExecutor, test_config


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


READY_DEADLINE_S = 30.0
SANDBOX = Sandbox(SandboxConfig()).state()
"""What an executor with the default configuration reports here (``ok`` where bwrap works)."""


async def readyz_until(client: httpx.AsyncClient, status: int) -> httpx.Response:
    """Ask ``/readyz`` until it answers ``status`` (readiness is only observable by asking;
    the gateway caches its look at the executors for a second or two)."""
    async with asyncio.timeout(READY_DEADLINE_S):
        while (response := await client.get("/readyz")).status_code != status:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    return response


async def test_readyz_waits_for_an_executor_consuming(
    client: httpx.AsyncClient, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    assert (await client.get("/healthz")).json()["status"] == "ok"
    unready = await client.get("/readyz")
    assert unready.status_code == 503, unready.text
    body = unready.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["nats"] == "ok" and body["checks"]["stream"] == "ok"
    assert "no executor" in body["checks"]["executors"], body
    async with InProcessExecutor(
        nats_url, namespace, "exec-ready", settings={"working_root": tmp_path}
    ):
        ready = await readyz_until(client, 200)
        assert ready.json() == {
            "status": "ok" if SANDBOX == "ok" else "degraded",
            "checks": {
                "nats": "ok",
                "stream": "ok",
                "executors": "ok",
                "sandbox": SANDBOX,
                "storage": "ok",
                "circuits": "ok",
            },
        }
    # A stopped executor deletes its presence: not ready again.
    gone = await readyz_until(client, 503)
    assert "no executor" in gone.json()["checks"]["executors"]


async def test_readyz_says_when_executors_run_tools_unsandboxed_and_stays_ready(
    client: httpx.AsyncClient, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    config = test_config(nats_url, namespace, lease_ttl_s=FAST_LEASE_TTL_S)
    config.sandbox.mode = "none"
    async with InProcessExecutor(
        nats_url, namespace, "exec-unconfined", config=config, settings={"working_root": tmp_path}
    ):
        ready = await readyz_until(client, 200)
    assert ready.json()["checks"]["executors"] == "ok"
    assert ready.json()["checks"]["sandbox"] == "off: sandbox.mode none, tools run unconfined"


async def test_readyz_is_degraded_with_the_reason_when_an_executors_tools_are_refused(
    client: httpx.AsyncClient,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An executor that finds no bubblewrap refuses every tool process: the gateway stays
    ready (200: traces run, files and models work) but says `degraded`, and why."""
    monkeypatch.setenv("PATH", str(tmp_path / "bin-without-bwrap"))
    async with InProcessExecutor(
        nats_url, namespace, "exec-no-sandbox", settings={"working_root": tmp_path}
    ):
        ready = await readyz_until(client, 200)
    body = ready.json()
    assert body["status"] == "degraded", body
    assert body["checks"]["executors"] == "ok"
    assert body["checks"]["sandbox"].startswith("unavailable: bubblewrap (bwrap) is not")


async def test_readyz_is_503_when_nats_goes_away() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(Path(tmp) / "js", port=0).start()
        try:
            config = gateway_config(
                NatsConfig(url=server.url, request_timeout_s=1, unavailable_retry_s=1)
            )
            async with serve_gateway(config) as running, running.client() as http:
                conn = running.runtime.service.conn
                assert (await http.get("/readyz")).json()["checks"]["nats"] == "ok"
                await asyncio.to_thread(server.stop)
                response = await http.get("/readyz")
                assert response.status_code == 503
                checks = response.json()["checks"]
                assert checks["nats"] == "down" or checks["stream"] != "ok"
                down = await http.post("/api/traces", json={"messages": [user_message("x")]})
                assert down.status_code == 503
                assert down.json()["error"]["code"] == "unavailable"
            # Shut down while NATS is away: the connection is closed, not left reconnecting,
            # and its subscriptions' tasks are stopped (not left pending for ever).
            assert conn.nc.is_closed and not conn.nc._subs
        finally:
            server.stop()


async def test_metrics_report_requests_traces_lag_and_retries(
    client: httpx.AsyncClient, store: EventStore, gateway: RunningGateway
) -> None:
    trace_id = (await client.post("/api/traces", json={"messages": [user_message("x")]})).json()[
        "trace_id"
    ]
    await client.get(f"/api/traces/{trace_id}")
    conn = gateway.runtime.service.conn
    await conn.js.add_consumer(
        conn.names.stream,
        api.ConsumerConfig(
            durable_name="executor",
            filter_subject=f"{conn.names.subject_root}.>",
            ack_policy=api.AckPolicy.EXPLICIT,
        ),
    )
    retry = msgspec.json.encode(LiveUpdate(kind="retry", text="429 from provider"))
    await conn.nc.publish(conn.names.live(trace_id), retry)
    await conn.nc.flush()
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    values = samples(response.text)
    assert (
        values[
            (
                "longhaul_http_requests_total",
                (("method", "POST"), ("route", "/api/traces"), ("status", "202")),
            )
        ]
        == 1
    )
    assert (
        values[
            (
                "longhaul_http_request_duration_seconds_count",
                (("method", "GET"), ("route", "/api/traces/{trace_id}")),
            )
        ]
        == 1
    )
    assert values[("longhaul_traces", (("status", "running"),))] == 1
    assert values[("longhaul_consumer_pending", (("consumer", "executor"),))] == 1
    assert values[("longhaul_gateway_events_appended_total", (("type", "trace_created"),))] == 1
    assert ("longhaul_trace_cost_usd", ()) in values
    assert values[("longhaul_llm_retries_total", ())] == 1


async def test_requests_are_logged_as_json_with_their_trace_id(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    trace_id = (await client.post("/api/traces", json={"messages": [user_message("x")]})).json()[
        "trace_id"
    ]
    with caplog.at_level(logging.INFO, logger="longhaul.gateway.access"):
        await client.get(f"/api/traces/{trace_id}")
    [record] = [r for r in caplog.records if r.name == "longhaul.gateway.access"]
    line = json.loads(JsonFormatter("gateway").format(record))
    assert line["trace_id"] == trace_id and line["service"] == "gateway"
    assert line["msg"].startswith(f"GET /api/traces/{trace_id} 200")


async def test_an_executor_present_again_after_an_outage_longer_than_its_presence_lease(
    tmp_path: Path,
) -> None:
    """NATS away for longer than the presence lease's TTL: the `executor.<id>` key expires,
    and the executor, consuming again once NATS is back, announces itself again (else
    /readyz would say for ever that no executor is consuming)."""
    store = tmp_path / "js"
    server = NatsServer(store, port=0).start()
    port = server.port
    try:
        config = test_config(server.url, "t_outage_", lease_ttl_s=FAST_LEASE_TTL_S)
        config.nats.unavailable_retry_s = 1
        gateway = gateway_config(NatsConfig(url=server.url, namespace="t_outage_"))
        async with (
            serve_gateway(gateway) as running,
            running.client() as http,
            InProcessExecutor(
                server.url,
                "t_outage_",
                "exec-outage",
                config=config,
                settings={"working_root": tmp_path / "work"},
            ),
        ):
            await readyz_until(http, 200)
            await asyncio.to_thread(server.stop)
            # longer than the lease's TTL: the key is gone when the server is back
            await asyncio.sleep(FAST_LEASE_TTL_S * 3)
            server = NatsServer(store, port=port).start()
            back = await readyz_until(http, 200)
            assert back.json()["checks"]["executors"] == "ok"
    finally:
        server.stop()
