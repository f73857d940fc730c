"""What an anonymous party on the web or the network can make a gateway do: DNS rebinding of a
keyless gateway, label growth in the metrics, reading the metrics, unauthenticated uploads."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
from longhaul.core.store import EventStore

from tests.integration.gateway.harness import user_message

CREATE = {"messages": [user_message("hello")]}


async def stored_events(store: EventStore) -> int:
    info = await store.conn.js.stream_info(store.names.stream)
    return info.state.messages


async def test_a_rebound_host_name_cannot_reach_a_keyless_gateway(
    shared_client: httpx.AsyncClient, shared_store: EventStore
) -> None:
    # A page on evil.example whose name now resolves to 127.0.0.1: the browser connects from
    # loopback and sends its own name as both Host and Origin, so they match.
    before = await stored_events(shared_store)
    rebound = {"Host": "evil.example:8080", "Origin": "http://evil.example:8080"}
    for response in (
        await shared_client.post("/api/traces", json=CREATE, headers=rebound),
        await shared_client.get("/api/traces", headers=rebound),
        await shared_client.get("/api/info", headers={"Host": "evil.example"}),
    ):
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["code"] == "forbidden"
        assert "LONGHAUL_API_KEYS" in error["message"]
    assert await stored_events(shared_store) == before
    port = urlsplit(str(shared_client.base_url)).port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.2", "[::1]:80"):
        origin = f"http://{host}"
        response = await shared_client.get("/api/traces", headers={"Host": host, "Origin": origin})
        assert response.status_code == 200, host
    created = await shared_client.post("/api/traces", json=CREATE)
    assert created.status_code == 202
