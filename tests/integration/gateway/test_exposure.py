"""What an anonymous party on the web or the network can make a gateway do: DNS rebinding of a
keyless gateway, label growth in the metrics, reading the metrics, unauthenticated uploads."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import httpx
import pytest
import websockets
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from websockets.typing import Origin

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)

CREATE = {"messages": [user_message("hello")]}
TENANT, SCRAPER = "tenant-key-0123456789", "scraper-key-9876543210"
OTHER = "other-tenant-key-5555555555"
MAX_UPLOAD = 64 * 1024


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


async def test_a_rebound_host_name_cannot_watch_a_keyless_gateway(
    shared_client: httpx.AsyncClient,
) -> None:
    trace_id = (await shared_client.post("/api/traces", json=CREATE)).json()["trace_id"]
    gateway = urlsplit(str(shared_client.base_url))
    assert gateway.hostname is not None and gateway.port is not None
    for name, allowed in (("evil.example:8080", False), (gateway.netloc, True)):
        # The browser's own socket to 127.0.0.1, its handshake naming the rebound host.
        sock = socket.create_connection((gateway.hostname, gateway.port))
        url = f"ws://{name}/api/traces/{trace_id}/watch"
        async with websockets.connect(url, sock=sock, origin=Origin(f"http://{name}")) as ws:
            first = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if allowed:
                assert first["event"] == "trace_created"
                continue
            assert first["error"]["code"] == "forbidden"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4403


def request_series(gateway: RunningGateway) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every series (sample name, labels) of the request counter and latency histogram."""
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for family in gateway.runtime.metrics.registry.collect():
        if family.name.startswith("longhaul_http_request"):
            for sample in family.samples:
                series.add((sample.name, tuple(sorted(sample.labels.items()))))
    return series


async def test_invented_methods_and_paths_add_no_metric_series(
    shared_gateway: RunningGateway, shared_client: httpx.AsyncClient
) -> None:
    async def garbage(count: int) -> None:
        for _ in range(count):
            method = "X" + secrets.token_hex(4).upper()
            path = f"/{secrets.token_hex(6)}/{secrets.token_hex(3)}"
            response = await shared_client.request(method, path)
            assert response.status_code in (404, 405)
            response = await shared_client.request(method, "/api/traces")
            assert response.status_code in (401, 404, 405)

    await garbage(5)  # the first ones create the "other" / "unmatched" series once
    before = request_series(shared_gateway)
    await garbage(100)
    after = request_series(shared_gateway)
    assert after == before
    methods = {dict(labels).get("method", "") for _, labels in after}
    assert "other" in methods and not any(method.startswith("X") for method in methods)


async def test_metrics_are_for_the_operators_scraper_only(nats_config: NatsConfig) -> None:
    config = gateway_config(nats_config, api_keys=TENANT, metrics_keys=[SCRAPER])
    async with serve_gateway(config) as gateway:
        async with gateway.client(TENANT) as tenant:
            assert (await tenant.post("/api/traces", json=CREATE)).status_code == 202
        async with (
            gateway.client() as anonymous,
            gateway.client(TENANT) as tenant,
            gateway.client(SCRAPER) as scraper,
        ):
            for refused in (await anonymous.get("/metrics"), await tenant.get("/metrics")):
                assert refused.status_code == 401
                assert refused.json()["error"]["code"] == "unauthorized"
                assert "longhaul_traces" not in refused.text
            scraped = await scraper.get("/metrics")
            assert scraped.status_code == 200
            assert 'longhaul_traces{status="running"} 1.0' in scraped.text
            # The scraper's key is not an API key.
            assert (await scraper.get("/api/traces")).status_code == 401
    # Keys but no scraper key: the metrics are no one's.
    config = gateway_config(nats_config, api_keys=TENANT)
    async with serve_gateway(config) as gateway, gateway.client(TENANT) as tenant:
        refused = await tenant.get("/metrics")
        assert refused.status_code == 401
        assert "gateway.metrics_keys" in refused.json()["error"]["message"]


async def status_while_sending(url: str, path: str, headers: dict[str, str]) -> int:
    """Declare a multipart upload of the largest allowed size, send 16 KiB of it and read the
    answer without sending more: only a server that decides before reading the body answers."""
    parsed = urlsplit(url)
    assert parsed.hostname is not None and parsed.port is not None
    reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port)
    try:
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {parsed.netloc}",
            "Content-Type: multipart/form-data; boundary=x",
            f"Content-Length: {MAX_UPLOAD}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        writer.write(b'--x\r\nContent-Disposition: form-data; name="files"; filename="a"\r\n\r\n')
        writer.write(b"0" * 16384)
        await writer.drain()
        async with asyncio.timeout(10):
            status_line = await reader.readline()
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_an_upload_is_authenticated_before_its_body_is_read(
    nats_config: NatsConfig,
) -> None:
    config = gateway_config(nats_config, api_keys=f"{TENANT},{OTHER}", max_upload_bytes=MAX_UPLOAD)
    async with serve_gateway(config) as gateway:
        async with gateway.client(TENANT) as tenant:
            trace_id = (await tenant.post("/api/traces", json=CREATE)).json()["trace_id"]
        path = f"/api/traces/{trace_id}/files"
        assert await status_while_sending(gateway.url, path, {}) == 401
        wrong_key = {"Authorization": f"Bearer {OTHER}"}
        assert await status_while_sending(gateway.url, path, wrong_key) == 404
        async with gateway.client(TENANT) as tenant:  # still serving, uploads still work
            sent = await tenant.post(path, files=[("files", ("a.txt", b"hello"))])
            assert sent.status_code == 202

            async def chunks() -> AsyncIterator[bytes]:
                yield b'--x\r\nContent-Disposition: form-data; name="files"; filename="b"\r\n\r\n'
                for _ in range(4):
                    yield b"0" * MAX_UPLOAD

            streamed = await tenant.post(
                path, content=chunks(), headers={"Content-Type": "multipart/form-data; boundary=x"}
            )
            assert "content-length" not in streamed.request.headers
            assert streamed.status_code == 413
            assert streamed.json()["error"]["code"] == "body_too_large"
