"""API keys: hashed, constant-time, and traces isolated between keys (others get 404)."""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import logging
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
import websockets
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.gateway.auth import KeyRing, owner_id
from longhaul.gateway.main import bind_host
from pydantic import SecretStr

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.folds import trace_state

ALICE, BOB, CAROL = "alice-key-0123456789", "bob-key-9876543210", "carol-key-5555"
CAROL_HASHED = "sha256:" + hashlib.sha256(CAROL.encode()).hexdigest()


@pytest.fixture
async def keyed(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    config = gateway_config(nats_config, api_keys=f"{ALICE},{BOB},{CAROL_HASHED}")
    async with serve_gateway(config, heartbeat_s=0.3) as running:
        yield running


def test_keys_are_kept_only_as_digests() -> None:
    ring = KeyRing([SecretStr(ALICE), SecretStr(CAROL_HASHED)])
    assert ALICE not in repr(vars(ring)) and ALICE.encode() not in b"".join(ring._digests)
    alice = ring.identify(ALICE)
    assert alice is not None
    assert alice.owner == owner_id(hashlib.sha256(ALICE.encode()).digest())
    assert ring.identify(CAROL) is not None
    assert ring.identify("alice-key-012345678") is None
    assert not ring.open and KeyRing([]).open


async def test_missing_or_wrong_key_is_401(keyed: RunningGateway, store: EventStore) -> None:
    async with keyed.client() as anonymous, keyed.client("not-a-key") as wrong:
        for response in (
            await anonymous.get("/api/traces"),
            await wrong.get("/api/traces"),
            await anonymous.post("/api/traces", json={"messages": [user_message("x")]}),
            await anonymous.get("/api/info"),
        ):
            assert response.status_code == 401
            assert response.json()["error"]["code"] == "unauthorized"
            assert response.headers["www-authenticate"] == "Bearer"
        basic = await anonymous.get("/api/traces", headers={"Authorization": "Basic YTpi"})
        assert basic.status_code == 401
        assert (await anonymous.get("/healthz")).status_code == 200
    info = await store.conn.js.stream_info(store.names.stream)
    assert info.state.messages == 0


async def test_traces_are_isolated_between_keys(keyed: RunningGateway, store: EventStore) -> None:
    async with keyed.client(ALICE) as alice, keyed.client(BOB) as bob:
        created = await alice.post("/api/traces", json={"messages": [user_message("secret")]})
        trace_id = created.json()["trace_id"]
        state = await trace_state(store, trace_id)
        assert state.owner == (await alice.get("/api/info")).json()["owner"]
        assert state.owner is not None and state.owner.startswith("k_")
        assert ALICE not in state.owner
        assert (await alice.get(f"/api/traces/{trace_id}")).status_code == 200
        for response in (
            await bob.get(f"/api/traces/{trace_id}"),
            await bob.get(f"/api/traces/{trace_id}/messages"),
            await bob.get(f"/api/traces/{trace_id}/events?follow=false"),
            await bob.post(f"/api/traces/{trace_id}/stop"),
            await bob.post(f"/api/traces/{trace_id}/run", json={"after_sequence": 1}),
        ):
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "not_found"
        assert (await bob.get("/api/traces")).json()["traces"] == []
        listed = (await alice.get("/api/traces")).json()["traces"]
        assert [t["trace_id"] for t in listed] == [trace_id]
        task = (await alice.post("/api/tasks", json={"goal": "g"})).json()["task_id"]
        assert (await bob.get(f"/api/tasks/{task}")).status_code == 404
        assert (await bob.post(f"/api/tasks/{task}/resume")).status_code == 404
        for review in ({"approved": False}, {"approved": True, "phases": [{"id": "x"}]}):
            assert (await bob.post(f"/api/tasks/{task}/plan", json=review)).status_code == 404
    assert len([r async for r in store.replay("trace", trace_id)]) == 1


async def test_hashed_key_in_config_authenticates(keyed: RunningGateway) -> None:
    async with keyed.client(CAROL) as carol:
        assert (await carol.get("/api/traces")).status_code == 200


async def test_websocket_refuses_other_keys(
    keyed: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="uvicorn.error")
    async with keyed.client(ALICE) as alice:
        trace_id = (await alice.post("/api/traces", json={"messages": [user_message("x")]})).json()[
            "trace_id"
        ]
    ws_url = keyed.url.replace("http://", "ws://") + f"/api/traces/{trace_id}/watch"
    async with websockets.connect(
        ws_url, additional_headers={"Authorization": f"Bearer {BOB}"}
    ) as ws:
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert error["error"]["code"] == "not_found"
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4404
    async with websockets.connect(ws_url) as ws:
        error = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert error["error"]["code"] == "unauthorized"
    async with websockets.connect(f"{ws_url}?api_key={ALICE}") as ws:
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert first["event"] == "trace_created" and first["id"] >= 1
    # uvicorn logs the handshake with its query string: the key is redacted (S8).
    assert "api_key=[redacted]" in caplog.text and ALICE not in caplog.text


async def test_keyless_gateway_acts_as_one_local_owner(
    client: httpx.AsyncClient, store: EventStore
) -> None:
    trace_id = (await client.post("/api/traces", json={"messages": [user_message("x")]})).json()[
        "trace_id"
    ]
    assert (await trace_state(store, trace_id)).owner == "local"
    info = (await client.get("/api/info")).json()
    assert info["auth"] is False and info["owner"] == "local"


def non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))  # a UDP connect sends no packet
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


def test_keyless_gateway_binds_loopback_only(nats_config: NatsConfig) -> None:
    assert bind_host(gateway_config(nats_config, host="0.0.0.0")) == "127.0.0.1"
    keyed = gateway_config(nats_config, host="0.0.0.0", api_keys=ALICE)
    assert bind_host(keyed) == "0.0.0.0"


async def test_keyless_gateway_refuses_non_loopback_peers(nats_config: NatsConfig) -> None:
    """Even if something binds it wider, a keyless gateway answers remote peers 403."""
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    async with serve_gateway(gateway_config(nats_config), host="0.0.0.0") as running:
        port = running.url.rsplit(":", 1)[1]
        async with httpx.AsyncClient(base_url=f"http://{address}:{port}", timeout=10) as remote:
            refused = await remote.get("/api/traces")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
        async with running.client() as local:
            assert (await local.get("/api/traces")).status_code == 200


async def test_cors_is_off_by_default_and_on_for_configured_origins(
    nats_config: NatsConfig, client: httpx.AsyncClient
) -> None:
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    closed = await client.options("/api/traces", headers=preflight)
    assert "access-control-allow-origin" not in closed.headers
    config = gateway_config(nats_config, cors_origins=["https://app.example"])
    async with serve_gateway(config) as running, running.client() as http:
        opened = await http.options("/api/traces", headers=preflight)
        assert opened.headers["access-control-allow-origin"] == "https://app.example"
        created = await http.post(
            "/api/traces",
            json={"messages": [user_message("x")]},
            headers={"Origin": "https://app.example"},
        )
        assert created.status_code == 202
        assert created.headers["access-control-allow-origin"] == "https://app.example"
        other = await http.post(
            "/api/traces",
            json={"messages": [user_message("x")]},
            headers={"Origin": "https://other.example"},
        )
        assert other.status_code == 403
