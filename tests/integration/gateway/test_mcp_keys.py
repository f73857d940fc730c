"""Per-key MCP servers through the stack: a gateway with two API keys, an executor configured
with a naive file server (``tests/support/mcp_server.py``: any path, absolute or with ``..``,
no checks of its own) run per key in the sandbox. Key B's traces cannot see, read or overwrite
a file key A's trace wrote through the server, and the server's view of the host holds its
key's directory and the read-only code it runs, nothing else. An instance unused for
``idle_s`` stops (``GET /api/tools`` shows none running) and the next call starts another,
which finds the key's files where they were."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.core.config import NatsConfig
from longhaul.core.store import EventStore
from longhaul.domain.config import McpServerConfig, ToolsConfig

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    user_message,
)
from tests.integration.gateway.test_key_isolation import calls, owner_of, tool_outputs
from tests.integration.gateway.test_uploads import final_view
from tests.support.stack import InProcessExecutor, eventually, test_config

ROOT = Path(__file__).resolve().parents[3]
KEY_A, KEY_B = "key-a-mcp-isolation-0123456789", "key-b-mcp-isolation-9876543210"
SECRET = "MCP-SECRET-4711"

pytestmark = pytest.mark.skipif(not Sandbox().confined, reason="bubblewrap cannot run here")


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


async def run(
    client: httpx.AsyncClient, store: EventStore, path: Path, *steps: tuple[str, dict[str, Any]]
) -> list[str]:
    """A trace of ``client``'s key whose model calls ``steps`` one by one; their outputs."""
    model = write_script(path, [*calls(*steps), {"content": "done"}])
    body = {"messages": [user_message("use the files")], "model": model}
    trace_id = (await client.post("/api/traces", json=body)).json()["trace_id"]
    assert (await final_view(client, store, trace_id))["status"] == "completed"
    return await tool_outputs(client, trace_id)


async def fs_status(client: httpx.AsyncClient) -> dict[str, Any] | None:
    """The server ``fs`` as ``GET /api/tools`` shows it (``None`` while no live executor's
    catalogue has been found)."""
    listed = (await client.get("/api/tools")).json()
    return next((server for server in listed["mcp_servers"] if server["name"] == "fs"), None)


async def none_running(client: httpx.AsyncClient) -> dict[str, Any] | None:
    status = await fs_status(client)
    return status if status is not None and status["instances"] == 0 else None


async def test_two_keys_cannot_see_each_others_files_through_an_mcp_server(
    gateway: RunningGateway, store: EventStore, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    server = McpServerConfig(
        command=sys.executable,
        args=["-m", "tests.support.mcp_server", "stdio"],
        env={"PYTHONPATH": str(ROOT)},
        read_only=[str(ROOT), sys.base_prefix],
        idle_s=1,
    )
    config = test_config(nats_url, namespace, tools=ToolsConfig(mcp_servers={"fs": server}))
    a_home = work / "keys" / owner_of(KEY_A)
    a_file = a_home / "secret.txt"
    settings = {"working_root": work}
    async with (
        InProcessExecutor(nats_url, namespace, config=config, settings=settings),
        gateway.client(KEY_A) as alice,
        gateway.client(KEY_B) as bob,
    ):
        # listed from the probe: no key's instance runs
        status = await eventually(lambda: none_running(alice), within=30, every=0.1)
        assert status["state"] == "up" and status["scope"] == "key"
        assert status["instances"] == 0
        wrote = await run(
            alice,
            store,
            tmp_path / "a.yaml",
            ("fs__write_file", {"path": "secret.txt", "content": SECRET}),
        )
        assert wrote == ["wrote secret.txt"] and a_file.read_text() == SECRET

        attempts = (
            ("fs__list_dir", {"path": "."}),
            ("fs__read_file", {"path": "secret.txt"}),
            ("fs__read_file", {"path": str(a_file)}),
            ("fs__read_file", {"path": f"../{owner_of(KEY_A)}/secret.txt"}),
            ("fs__write_file", {"path": str(a_file), "content": "overwritten"}),
            ("fs__list_dir", {"path": str(work / "keys")}),
            ("fs__list_dir", {"path": str(tmp_path)}),
        )
        seen = await run(bob, store, tmp_path / "b.yaml", *attempts)
        listed, *refused, keys, scratch = seen
        assert len(seen) == len(attempts)
        assert not [out for out in seen if SECRET in out]
        assert "secret.txt" not in listed
        assert all("mcp_tool_error" in out for out in refused)
        # A's directory is not in B's server's view, nor this test's scripts next to the
        # working root: the directories above are mount-point parents holding only the path
        # down (under a root service, where tools run as nobody, not even listable)
        for above, only in ((keys, owner_of(KEY_B)), (scratch, "work")):
            assert above == only or "mcp_tool_error" in above, above
            assert owner_of(KEY_A) not in above and "a.yaml" not in above
        assert a_file.read_text() == SECRET

        await eventually(lambda: none_running(alice), within=60, every=0.2)  # reaped
        again = await run(
            alice, store, tmp_path / "c.yaml", ("fs__read_file", {"path": "secret.txt"})
        )
        assert again == [SECRET]
