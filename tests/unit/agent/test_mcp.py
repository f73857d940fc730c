"""``McpTools`` against the real stdio test server (``tests/support/mcp_server.py``): tools
registered as ``<server>__<tool>``, a slow call bounded by its timeout, a server that cannot
start reported with the reason (a missing variable, a refused token) without holding up the
others, results mapped (structured content, images as attachments)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types
import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolRegistry, ToolResult
from longhaul.agent.tools.mcp import exposed_name
from longhaul.agent.tools.mcp_tools import McpTools, _input_schema
from longhaul.domain.config import McpServerConfig

from tests.support.counting_server import counting_server
from tests.unit.agent.support import tool_context

ROOT = Path(__file__).resolve().parents[3]


def stdio(env: dict[str, str] | None = None, call_timeout_s: float = 60) -> McpServerConfig:
    return McpServerConfig(
        command=sys.executable,
        args=["-m", "tests.support.mcp_server", "stdio"],
        env={"PYTHONPATH": str(ROOT), **(env or {})},
        cwd=str(ROOT),
        call_timeout_s=call_timeout_s,
        shared=True,
    )


@pytest.fixture(scope="module")
async def servers() -> AsyncIterator[tuple[McpTools, ToolRegistry]]:
    registry = ToolRegistry()
    tools = McpTools(
        {
            "t": stdio(call_timeout_s=1),
            "nokey": stdio(env={"TOKEN": "${LONGHAUL_TEST_UNSET_VARIABLE}"}),
            "gone": McpServerConfig(url="http://127.0.0.1:9/mcp", connect_timeout_s=1, shared=True),
        },
        registry,
        working_root=ROOT,
        environ={},
    )
    await tools.start()
    try:
        yield tools, registry
    finally:
        await tools.aclose()


async def test_tools_are_registered_with_their_schema(
    servers: tuple[McpTools, ToolRegistry],
) -> None:
    _, registry = servers
    assert {"t__echo", "t__add", "t__wait", "t__pixel"} <= set(registry.names())
    add = registry.get("t__add")
    assert add is not None and add.metadata == {"origin": "mcp", "server": "t", "shared": True}
    assert add.input_schema["required"] == ["a", "b"] and "title" not in add.input_schema


async def test_servers_that_cannot_start_say_why(servers: tuple[McpTools, ToolRegistry]) -> None:
    tools, registry = servers
    # "gone" is retried with backoff: a retry may be under way; its attempt ends refused
    await tools.shared["gone"].wait_started()
    status = {server.name: server for server in tools.status()}
    assert status["t"].state == "up" and status["t"].tools == 11
    assert status["nokey"].state == "down"
    assert "LONGHAUL_TEST_UNSET_VARIABLE is not set" in str(status["nokey"].error)
    assert status["gone"].state == "down" and status["gone"].transport == "http"
    assert not any(name.startswith(("nokey__", "gone__")) for name in registry.names())


async def test_a_slow_call_times_out(
    servers: tuple[McpTools, ToolRegistry], tmp_path: Path
) -> None:
    _, registry = servers
    wait = registry.get("t__wait")
    assert wait is not None
    with pytest.raises(ToolError) as late:
        await wait.run(tool_context(tmp_path), {"seconds": 30})
    assert late.value.code == "mcp_timeout" and "within 1 s" in str(late.value)
    echo = registry.get("t__echo")
    assert echo is not None  # the server is still up after a timeout
    answer = await echo.run(tool_context(tmp_path), {"text": "still here"})
    assert isinstance(answer, ToolResult) and answer.output == "echo: still here"


async def test_a_call_carries_its_idempotency_key_in_its_meta(
    servers: tuple[McpTools, ToolRegistry], tmp_path: Path
) -> None:
    """The same key when the call is re-run after a crash: a server that honours it acts once."""
    _, registry = servers
    key = registry.get("t__key")
    assert key is not None
    context = tool_context(tmp_path)
    answer = await key.run(context, {})
    assert isinstance(answer, ToolResult) and answer.output == context.idempotency_key
    assert context.tool_call_id in answer.output


async def test_images_become_attachments(
    servers: tuple[McpTools, ToolRegistry], tmp_path: Path
) -> None:
    _, registry = servers
    pixel = registry.get("t__pixel")
    assert pixel is not None
    result = await pixel.run(tool_context(tmp_path), {})
    assert isinstance(result, ToolResult) and result.output == "one red pixel"
    [image] = result.attachments
    assert image.media_type == "image/png" and image.data.startswith(b"\x89PNG")


def test_exposed_names_fit_every_provider() -> None:
    assert exposed_name("files", "read.file v2") == "files__read_file_v2"
    assert len(exposed_name("s", "x" * 100)) == 64


def test_a_server_schema_that_would_fetch_or_backtrack_is_not_used() -> None:
    """A hostile MCP server's schema: a remote ``$ref`` (fetched by jsonschema) or a pattern
    RE2 cannot run is dropped for "any object", with a warning; nothing is fetched."""
    with counting_server() as (url, hits):
        for schema in (
            {"type": "object", "properties": {"a": {"$ref": f"{url}/a.json"}}},
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(x)\\1"}}},
        ):
            tool = mcp_types.Tool(name="t", input_schema=schema)
            assert _input_schema(tool) == {"type": "object", "properties": {}}
    assert hits == []
