"""Per-key MCP servers against the real stdio test server run in the real sandbox (bubblewrap):
an instance per key, each confined to its key's directory (the server itself checks nothing),
tools listed once from a probe, an idle instance stopped and a new one started on next use."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolRegistry, ToolResult
from longhaul.agent.tools.mcp_tools import McpTools
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.domain.config import McpServerConfig

from tests.support.stack import eventually
from tests.unit.agent.support import new_state, tool_context

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not Sandbox().confined, reason="bubblewrap cannot run here")


def per_key(**fields: Any) -> McpServerConfig:
    """The test server per key: it may read this checkout and the interpreter, nothing else."""
    return McpServerConfig(
        command=sys.executable,
        args=["-m", "tests.support.mcp_server", "stdio"],
        env={"PYTHONPATH": str(ROOT)},
        read_only=[str(ROOT), sys.base_prefix],
        call_timeout_s=20,
        **fields,
    )


@pytest.fixture
async def files(tmp_path: Path) -> AsyncIterator[tuple[McpTools, ToolRegistry]]:
    registry = ToolRegistry()
    tools = McpTools(
        {"fs": per_key(idle_s=0.5)}, registry, working_root=tmp_path / "work", environ={}
    )
    await tools.start()
    try:
        yield tools, registry
    finally:
        await tools.aclose()


async def call(
    registry: ToolRegistry, owner: str, tool: str, trace_id: str = "t_test", **arguments: Any
) -> str:
    found = registry.get(f"fs__{tool}")
    assert found is not None
    state = new_state("work", trace_id=trace_id)
    state.owner = owner
    result = await found.run(tool_context(Path("/nonexistent"), state=state), arguments)
    assert isinstance(result, ToolResult)
    return result.output


async def test_tools_are_listed_from_a_probe_without_a_running_instance(
    files: tuple[McpTools, ToolRegistry],
) -> None:
    tools, registry = files
    assert {"fs__read_file", "fs__write_file", "fs__list_dir"} <= set(registry.names())
    [status] = tools.status()
    assert status.state == "up" and status.scope == "key" and status.instances == 0
    assert status.tools >= 10


async def test_a_key_cannot_reach_another_keys_files_through_its_server(
    files: tuple[McpTools, ToolRegistry], tmp_path: Path
) -> None:
    _, registry = files
    keys = tmp_path / "work" / "keys"
    assert await call(registry, "k_alice", "write_file", path="secret.txt", content="4711")
    assert (keys / "k_alice" / "secret.txt").read_text() == "4711"
    assert await call(registry, "k_alice", "read_file", path="secret.txt") == "4711"

    assert "secret.txt" not in await call(registry, "k_bob", "list_dir", path=".")
    # the keys directory above is a mount-point parent: it holds only k_bob, and under a
    # root service (tools as nobody) it is not even listable
    above = await call(registry, "k_bob", "list_dir", path=str(keys))
    assert "k_alice" not in above and (above == "k_bob" or "mcp_tool_error" in above)
    for path in (str(keys / "k_alice" / "secret.txt"), "../k_alice/secret.txt"):
        result = await call(registry, "k_bob", "read_file", path=path)
        assert "4711" not in result and "mcp_tool_error" in result  # no such file there
    # nor can it write into the other key's directory, or anywhere but its own
    for path in (str(keys / "k_alice" / "planted.txt"), str(ROOT / "planted.txt")):
        assert "wrote" not in await call(registry, "k_bob", "write_file", path=path, content="x")
    assert not (keys / "k_alice" / "planted.txt").exists()
    assert not (ROOT / "planted.txt").exists()
    # and it runs under the sandbox's limits (the default 1024 MB largest file)
    limits = await call(registry, "k_bob", "read_file", path="/proc/self/limits")
    assert re.search(r"Max file size\s+1073741824\s+1073741824", limits), limits


async def test_an_idle_instance_stops_and_the_next_call_starts_another(
    files: tuple[McpTools, ToolRegistry],
) -> None:
    tools, registry = files
    first = await call(registry, "k_alice", "boot")
    assert tools.status()[0].instances == 1

    async def stopped() -> bool:
        return tools.status()[0].instances == 0

    await eventually(stopped, within=30, every=0.1)
    second = await call(registry, "k_alice", "boot")
    assert second != first and tools.status()[0].instances == 1


async def test_scope_family_gives_each_trace_family_its_own_instance(tmp_path: Path) -> None:
    registry = ToolRegistry()
    tools = McpTools({"fs": per_key(scope="family")}, registry, working_root=tmp_path, environ={})
    await tools.start()
    try:
        await call(registry, "k_a", "write_file", "t_one", path="f.txt", content="1")
        assert (tmp_path / "keys" / "k_a" / "t_one" / "f.txt").read_text() == "1"
        assert "f.txt" not in await call(registry, "k_a", "list_dir", "t_two", path=".")
        assert tools.status()[0].instances == 2
    finally:
        await tools.aclose()


async def test_a_per_key_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    registry = ToolRegistry()
    broken = per_key().model_copy(update={"command": "/nonexistent/mcp-server"})
    tools = McpTools({"fs": broken}, registry, working_root=tmp_path, environ={})
    await tools.start()
    try:
        [status] = tools.status()
        assert status.state == "down" and status.error
        assert not registry.names()
    finally:
        await tools.aclose()


def test_a_url_server_must_say_whether_it_is_shared_or_per_key() -> None:
    with pytest.raises(ValueError, match="shared: true"):
        McpServerConfig(url="http://127.0.0.1:9/mcp")
    with pytest.raises(ValueError, match="key's directory"):
        McpServerConfig(command="x", cwd="/srv")
    assert McpServerConfig(url="http://x/mcp", shared=True).shared
    keyed = McpServerConfig(url="http://x/mcp", headers_per_key={"k_a": {"A": "${T}"}})
    assert keyed.per_key


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """The test server over HTTP, answering only ``Bearer alice-token``."""
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.support.mcp_server", "http", "--token", "alice-token"),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            port = int(await process.stdout.readline())
            while True:  # the port is printed before uvicorn listens on it
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                await writer.wait_closed()
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        await process.wait()


async def test_a_url_server_gets_each_keys_own_headers(http_server: str, tmp_path: Path) -> None:
    registry = ToolRegistry()
    config = McpServerConfig(
        url=http_server,
        headers_per_key={
            "k_alice": {"Authorization": "Bearer ${ALICE_TOKEN}"},
            "k_mallory": {"Authorization": "Bearer wrong"},
        },
        connect_timeout_s=10,
        idle_s=0.5,
    )
    environ = {"ALICE_TOKEN": "alice-token"}  # the operator's environment, never a client's
    tools = McpTools({"fs": config}, registry, working_root=tmp_path, environ=environ)
    await tools.start()  # the probe lists with the first key's headers
    try:
        assert await call(registry, "k_alice", "echo", text="hi") == "echo: hi"
        with pytest.raises(ToolError) as unlisted:
            await call(registry, "k_bob", "echo", text="hi")
        assert unlisted.value.code == "mcp_unavailable" and "no credentials" in str(unlisted.value)
        with pytest.raises(ToolError) as refused:
            await call(registry, "k_mallory", "echo", text="hi")
        assert refused.value.code == "mcp_unavailable"

        async def none_left() -> bool:  # alice's idles out, mallory's stops retrying
            return tools.status()[0].instances == 0

        await eventually(none_left, within=30, every=0.1)
    finally:
        await tools.aclose()


async def test_a_server_script_under_tmp_runs_with_nothing_listed_read_only(
    tmp_path: Path,
) -> None:
    """An operator's server script in /tmp, run by this virtualenv's interpreter, with no
    `read_only`: the sandbox binds what the command executes (the interpreter, its virtualenv
    and base installation, the script) above its private /tmp, so its tools are listed and it
    answers, rather than being dropped."""
    assert str(tmp_path).startswith(("/tmp/", "/var/tmp/")), tmp_path
    script = tmp_path / "operator" / "server.py"
    script.parent.mkdir()
    script.write_text((ROOT / "tests" / "support" / "mcp_server.py").read_text())
    config = McpServerConfig(command=sys.executable, args=[str(script), "stdio"])
    assert not config.read_only
    registry = ToolRegistry()
    tools = McpTools({"fs": config}, registry, working_root=tmp_path / "work", environ={})
    await tools.start()
    try:
        [status] = tools.status()
        assert status.state == "up", status
        (tmp_path / "work").mkdir(exist_ok=True)
        assert await call(registry, "k_alice", "write_file", path="a", content="x") == "wrote a"
    finally:
        await tools.aclose()
