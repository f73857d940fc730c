"""Every 4xx path answers the uniform JSON error, and bad input never reaches the log."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)

CREATE = {"messages": [user_message("hi")]}


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]
    return dict(body["error"])


async def stored_events(store: EventStore) -> int:
    """Events in the namespace's stream: a refused request must not change this."""
    info = await store.conn.js.stream_info(store.names.stream)
    return int(info.state.messages)


async def test_malformed_json_is_400(
    shared_client: httpx.AsyncClient, shared_store: EventStore
) -> None:
    before = await stored_events(shared_store)
    response = await shared_client.post(
        "/api/traces", content=b'{"messages": [', headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "malformed_json")
    assert await stored_events(shared_store) == before


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": []},
        {"messages": "hello"},
        {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "tool", "content": "x"}]},
        {"messages": [user_message("x")], "max_iterations": "many"},
        {"messages": [user_message("x")], "max_iterations": 0},
        {"messages": [user_message("x")], "temperature": 9},
        {"messages": [user_message("x")], "unknown_field": 1},
        {"messages": [user_message("x")], "tools": ["../../etc/passwd"]},
        {"messages": [user_message("x")], "preset": "a/b"},
        [1, 2, 3],
    ],
)
async def test_schema_violations_are_422(
    shared_client: httpx.AsyncClient, shared_store: EventStore, body: Any
) -> None:
    before = await stored_events(shared_store)
    error = assert_error(await shared_client.post("/api/traces", json=body), 422, "invalid_request")
    assert error["details"] and all("loc" in item for item in error["details"])
    assert await stored_events(shared_store) == before


async def test_text_json_cannot_carry_is_422(
    shared_client: httpx.AsyncClient, shared_store: EventStore
) -> None:
    """A lone surrogate (``\\ud800``) is valid JSON but not Unicode text."""
    before = await stored_events(shared_store)
    headers = {"Content-Type": "application/json"}
    as_string = b'{"messages": [{"role": "user", "content": "bad \\ud800"}]}'
    response = await shared_client.post("/api/traces", content=as_string, headers=headers)
    assert_error(response, 422, "invalid_request")
    in_a_part = b'{"messages": [{"role": "user", "content": [{"text": "bad \\ud800"}]}]}'
    response = await shared_client.post("/api/traces", content=in_a_part, headers=headers)
    assert_error(response, 422, "invalid_text")
    assert await stored_events(shared_store) == before


async def test_curl_form_encoded_json_is_accepted(shared_client: httpx.AsyncClient) -> None:
    """``curl -d '{…}'`` without -H sends application/x-www-form-urlencoded."""
    response = await shared_client.post(
        "/api/traces",
        content=b'{"messages": [{"role": "user", "content": "hi"}]}',
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 202


@pytest.mark.parametrize(
    "path",
    [
        "/api/traces/t_doesnotexist",
        "/api/traces/t_doesnotexist/messages",
        "/api/traces/t_doesnotexist/events",
        "/api/traces/t_a.b",
        "/api/traces/..%2F..%2Fetc%2Fpasswd",
        "/api/traces/t_x%2A",
        "/api/tasks/task_missing",
        "/api/v1/tasks/task_missing",
        "/api/tasks/task_missing/events",
    ],
)
async def test_unknown_or_unsafe_ids_are_404(shared_client: httpx.AsyncClient, path: str) -> None:
    assert_error(await shared_client.get(path), 404, "not_found")


@pytest.mark.parametrize("action", ["run", "stop", "resume", "reflect", "compact", "reply"])
async def test_writes_to_unknown_traces_are_404(
    shared_client: httpx.AsyncClient, action: str
) -> None:
    body = {"content": "x"} if action == "reply" else {}
    response = await shared_client.post(f"/api/traces/t_nope/{action}", json=body)
    assert_error(response, 404, "not_found")


async def test_unknown_route_and_method(shared_client: httpx.AsyncClient) -> None:
    assert_error(await shared_client.get("/api/nothing/here"), 404, "not_found")
    assert_error(await shared_client.delete("/api/traces"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "last_event_id", [b"yesterday", b"\xb2", b"1\xb3", b"\xd9\xa3", b"\xff\xfe", b"-1", b"9" * 20]
)
async def test_bad_last_event_id_is_400(
    shared_client: httpx.AsyncClient, last_event_id: bytes
) -> None:
    # Raw bytes: 0xB2 decodes (latin-1) to "²", a Unicode digit that int() refuses.
    trace_id = (await shared_client.post("/api/traces", json=CREATE)).json()["trace_id"]
    response = await shared_client.get(
        f"/api/traces/{trace_id}/events", headers=[(b"Last-Event-ID", last_event_id)]
    )
    assert_error(response, 400, "bad_request")


async def test_cross_site_browser_requests_are_403(
    shared_client: httpx.AsyncClient, shared_store: EventStore
) -> None:
    before = await stored_events(shared_store)
    response = await shared_client.post(
        "/api/traces", json=CREATE, headers={"Origin": "https://evil.example"}
    )
    assert_error(response, 403, "forbidden")
    assert await stored_events(shared_store) == before
    same_origin = await shared_client.post(
        "/api/traces", json=CREATE, headers={"Origin": str(shared_client.base_url).rstrip("/")}
    )
    assert same_origin.status_code == 202


@pytest.fixture
async def small_gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    config = gateway_config(nats_config, max_body_bytes=2048, rate_limit_per_minute=3)
    async with serve_gateway(config) as running:
        yield running


async def test_oversized_body_is_413(small_gateway: RunningGateway, store: EventStore) -> None:
    before = await stored_events(store)
    big = {"messages": [user_message("x" * 4096)]}
    async with small_gateway.client() as http:
        error = assert_error(await http.post("/api/traces", json=big), 413, "body_too_large")
    assert error["details"] == {"max_body_bytes": 2048}
    assert await stored_events(store) == before


async def test_oversized_streamed_body_is_413(
    small_gateway: RunningGateway, store: EventStore
) -> None:
    """Chunked upload without Content-Length: the limit holds while the body arrives."""
    before = await stored_events(store)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"x" * 1024
        yield b'"}]}'

    async with small_gateway.client() as http:
        response = await http.post(
            "/api/traces", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert "content-length" not in response.request.headers
        assert_error(response, 413, "body_too_large")
    assert await stored_events(store) == before


async def test_rate_limit_is_429_with_retry_after(small_gateway: RunningGateway) -> None:
    async with small_gateway.client() as http:
        statuses = [(await http.get("/api/traces")).status_code for _ in range(3)]
        assert statuses == [200, 200, 200]
        limited = await http.get("/api/traces")
        error = assert_error(limited, 429, "rate_limited")
        assert int(limited.headers["retry-after"]) >= 1
        assert error["details"]["retry_after_s"] > 0
        assert (await http.get("/healthz")).status_code == 200  # probes are not limited


async def test_gateway_survives_garbage(
    shared_client: httpx.AsyncClient, shared_store: EventStore
) -> None:
    before = await stored_events(shared_store)
    payloads = [b"\x00\xff\xfe", b"null", b"1e999999", b'{"messages": [null]}', b"[" * 5000]
    for raw in payloads:
        response = await shared_client.post(
            "/api/traces", content=raw, headers={"Content-Type": "application/json"}
        )
        assert response.status_code in (400, 422), (raw[:20], response.text)
    assert (await shared_client.get("/healthz")).status_code == 200
    assert (await shared_client.post("/api/traces", json=CREATE)).status_code == 202
    assert await stored_events(shared_store) == before + 1


async def test_a_script_outside_the_operators_directory_is_a_422_that_quotes_nothing(
    shared_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    outside = Path(tempfile.mkdtemp(prefix="lh-not-scripts-"))  # not under the session root
    secret = outside / "secret.yaml"
    secret.write_text("- content: the launch code is 0000\n")
    link = tmp_path / "link.yaml"  # inside the directory, pointing out of it
    link.symlink_to(secret)
    models = (f"scripted:{secret}", "scripted:../../../../etc/passwd", f"scripted:{link}")
    created = await shared_client.post("/api/traces", json={"messages": [user_message("hi")]})
    trace_id = created.json()["trace_id"]
    try:
        for model in models:
            phase = {"id": "p", "name": "p", "description": "d"}
            attempts = [
                ("/api/traces", {"messages": [user_message("hi")], "model": model}),
                (f"/api/traces/{trace_id}/run", {"messages": [user_message("hi")], "model": model}),
                ("/api/tasks", {"goal": "g", "options": {"model": model}}),
                ("/api/tasks", {"goal": "g", "options": {"phases": [{**phase, "model": model}]}}),
                (
                    "/api/tasks",
                    {
                        "goal": "g",
                        "options": {"phases": [{**phase, "competitors": [{"model": model}]}]},
                    },
                ),
            ]
            for path, body in attempts:
                response = await shared_client.post(path, json=body)
                assert response.status_code == 422, (path, model, response.text)
                error = response.json()["error"]
                assert error["code"] == "invalid_model"
                assert "launch code" not in response.text and "root:" not in response.text
    finally:
        shutil.rmtree(outside)
    # a script inside it (the session's temp root) is accepted, with options
    script = tmp_path / "ok.yaml"
    script.write_text("- content: hi\n")
    accepted = await shared_client.post(
        "/api/traces",
        json={"messages": [user_message("hi")], "model": f"scripted:{script}?latency_ms=5"},
    )
    assert accepted.status_code == 202, accepted.text


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/api/traces", {"GET", "POST"}),
        ("PUT", "/api/tasks", {"GET", "POST"}),
        ("POST", "/healthz", {"GET"}),
        ("DELETE", "/api/traces/t_x/stop", {"POST"}),
    ],
)
async def test_405_names_the_allowed_methods(
    shared_client: httpx.AsyncClient, method: str, path: str, allowed: set[str]
) -> None:
    response = await shared_client.request(method, path)
    error = assert_error(response, 405, "method_not_allowed")
    assert {m.strip() for m in response.headers["allow"].split(",")} >= allowed
    assert "HEAD" not in allowed or "GET" in response.headers["allow"]
    assert error["message"].rstrip().endswith(response.headers["allow"]), error
    for name in allowed:
        assert name in error["message"], error


@pytest.mark.parametrize(
    "model",
    [
        "scripted:auto?latency_ms=50",
        "scripted:auto?latency_ms=12.5&chunk=4",
        "scripted:demo?latency_ms=0",
    ],
)
async def test_documented_scripted_options_are_accepted(
    shared_client: httpx.AsyncClient, model: str
) -> None:
    response = await shared_client.post("/api/traces", json={**CREATE, "model": model})
    assert response.status_code == 202, response.text
