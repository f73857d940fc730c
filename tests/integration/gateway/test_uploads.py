"""Uploads through the stack: a multipart POST puts files in the trace's working directory,
the next run's model is told and can read them; bad names, oversized requests, a spent quota
and other keys' traces are refused without writing anything."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.support.folds import trace_state
from tests.support.stack import InProcessExecutor

ALICE, BOB = "alice-upload-key-0123456789", "bob-upload-key-9876543210"
DEADLINE_S = 60


@pytest.fixture
async def uploads(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    config = gateway_config(
        nats_config,
        api_keys=f"{ALICE},{BOB}",
        max_upload_bytes=64 * 1024,
        upload_quota_bytes_per_key=100 * 1024,
    )
    async with serve_gateway(config) as running:
        yield running


async def final_view(
    client: httpx.AsyncClient, store: EventStore, trace_id: str, after: int = 0
) -> Any:
    async with asyncio.timeout(DEADLINE_S):
        async for recorded in store.watch("trace", trace_id, after=after):
            if recorded.event.type in ("completed", "failed", "stopped"):
                return (await client.get(f"/api/traces/{trace_id}")).json()
    raise AssertionError("watch ended")


async def test_uploaded_files_reach_the_model_and_the_workdir(
    uploads: RunningGateway, store: EventStore, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    model = write_script(
        tmp_path / "read.yaml",
        [
            {"content": "send me the data"},
            {"tool_calls": [{"name": "read", "arguments": {"path": "data.csv"}}]},
            {"content": "the data has two rows"},
        ],
    )
    settings = {"working_root": work}
    async with (
        InProcessExecutor(nats_url, namespace, settings=settings),
        uploads.client(ALICE) as alice,
    ):
        body = {"messages": [user_message("analyse my data")], "model": model}
        trace_id = (await alice.post("/api/traces", json=body)).json()["trace_id"]
        assert (await final_view(alice, store, trace_id))["status"] == "completed"
        sent = await alice.post(
            f"/api/traces/{trace_id}/files",
            files=[("files", ("data.csv", b"a,b\n1,2\n3,4\n", "text/csv"))],
        )
        assert sent.status_code == 202, sent.text
        [accepted] = sent.json()["files"]
        assert (accepted["name"], accepted["size"]) == ("data.csv", 12)
        run = await alice.post(
            f"/api/traces/{trace_id}/run", json={"messages": [user_message("here it is")]}
        )
        assert run.status_code == 202
        after = run.json()["event_id"]
        assert (await final_view(alice, store, trace_id, after))["status"] == "completed"
    messages = (await alice_messages(uploads, trace_id))["messages"]
    told = [
        m for m in messages if m["role"] == "user" and "data.csv (12 bytes)" in str(m["content"])
    ]
    assert len(told) == 1
    read = [m for m in messages if m["role"] == "tool"][-1]
    assert "3,4" in str(read["content"])
    assert sorted(p.name for p in work.rglob("data.csv")) == ["data.csv"]


async def alice_messages(uploads: RunningGateway, trace_id: str) -> Any:
    async with uploads.client(ALICE) as alice:
        return (await alice.get(f"/api/traces/{trace_id}/messages")).json()


async def test_bad_uploads_are_refused_and_write_nothing(
    uploads: RunningGateway, store: EventStore
) -> None:
    async with uploads.client(ALICE) as alice, uploads.client(BOB) as bob:
        trace_id = (
            await alice.post("/api/traces", json={"messages": [user_message("hi")]})
        ).json()["trace_id"]
        url = f"/api/traces/{trace_id}/files"
        for name in ("../escape.txt", ".bashrc", "a/b.txt", "", "x" * 200, "..."):
            response = await alice.post(url, files=[("files", (name, b"x"))])
            assert response.status_code == 422, (name, response.text)
        big = await alice.post(url, files=[("files", ("big.bin", b"0" * (65 * 1024)))])
        assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
        assert (await bob.post(url, files=[("files", ("a.txt", b"x"))])).status_code == 404
        unknown = await alice.post("/api/traces/t_nope/files", files=[("files", ("a", b"x"))])
        assert unknown.status_code == 404
        # the quota: 100 KiB per key, 60 KiB per request
        ok = await alice.post(url, files=[("files", ("one.bin", b"1" * (60 * 1024)))])
        assert ok.status_code == 202
        spent = await alice.post(url, files=[("files", ("two.bin", b"2" * (60 * 1024)))])
        assert spent.status_code == 413
        assert spent.json()["error"]["code"] == "upload_quota_exceeded"
        state = await trace_state(store, trace_id)
    assert [u.name for u in state.uploads_pending] == ["one.bin"]
    kinds = [r.event.type async for r in store.replay("trace", trace_id)]
    assert kinds.count("file_uploaded") == 1


async def test_a_run_started_with_files_has_them_before_its_first_model_call(
    uploads: RunningGateway, store: EventStore, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    """``POST /api/runs`` with ``files``: the model's very first step already sees them."""
    work = tmp_path / "work"
    model = write_script(
        tmp_path / "first.yaml",
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": "README.md"}}]},
            {"content": "it says hello"},
        ],
    )
    settings = {"working_root": work}
    readme = base64.b64encode(b"# hello\nfirst line\n").decode()
    async with (
        InProcessExecutor(nats_url, namespace, settings=settings),
        uploads.client(ALICE) as alice,
    ):
        body = {
            "goal": "summarise the README",
            "model": model,
            "files": [{"name": "README.md", "content": readme}],
        }
        sent = await alice.post("/api/runs", json=body)
        assert sent.status_code == 202, sent.text
        assert sent.json()["kind"] == "trace"  # files go to one agent
        trace_id = sent.json()["trace_id"]
        assert (await final_view(alice, store, trace_id))["status"] == "completed"
    messages = (await alice_messages(uploads, trace_id))["messages"]
    [read] = [m for m in messages if m["role"] == "tool"]
    assert "first line" in str(read["content"])
    assert [p.read_text() for p in work.rglob("README.md")] == ["# hello\nfirst line\n"]


async def test_a_run_with_bad_files_is_refused_and_starts_nothing(
    uploads: RunningGateway,
) -> None:
    ok = base64.b64encode(b"x").decode()
    bad = [
        {"goal": "g", "files": [{"name": "../up.txt", "content": ok}]},
        {"goal": "g", "files": [{"name": ".env", "content": ok}]},
        {"goal": "g", "files": [{"name": "a.txt", "content": "not base64!"}]},
        {"goal": "g", "files": [{"name": "a.txt", "content": "5\u00f8\u0013>X"}]},  # not ASCII
        {"goal": "g", "mode": "task", "files": [{"name": "a.txt", "content": ok}]},
    ]
    async with uploads.client(ALICE) as alice:
        for body in bad:
            response = await alice.post("/api/runs", json=body)
            assert response.status_code == 422, (body, response.text)
        assert (await alice.get("/api/traces")).json()["traces"] == []
        # over the key's quota (100 KiB): refused whole, and nothing charged
        big = base64.b64encode(b"1" * (60 * 1024)).decode()
        files = [{"name": f"{n}.bin", "content": big} for n in range(2)]
        over = await alice.post("/api/runs", json={"goal": "g", "files": files})
        assert over.status_code == 413, over.text
        assert over.json()["error"]["code"] == "upload_quota_exceeded"
        assert (await alice.get("/api/traces")).json()["traces"] == []
        fits = await alice.post("/api/runs", json={"goal": "g", "files": files[:1]})
        assert fits.status_code == 202, fits.text
