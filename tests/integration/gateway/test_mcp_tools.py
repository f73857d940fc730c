"""MCP servers and web search through the whole stack: a real stdio server process and a real
streamable-HTTP one (both written with the SDK's server API, ``tests/support/mcp_server.py``),
a local server speaking SearXNG's JSON API, an executor configured with them, the gateway's
``GET /api/tools`` and traces whose scripted model calls their tools — the research scenario
(search, read the page, compute with an MCP tool, answer) among them. A stdio server killed
under a run gives a clear tool error and comes back."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.agent.presets import READ_ONLY_TOOLS
from longhaul.domain.config import McpServerConfig, ToolsConfig, WebSearchConfig

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import RunningGateway
from tests.integration.gateway.test_full_stack import follow_until, is_final, main_path
from tests.support.pages import LocalSite
from tests.support.search_fakes import FakeSearXNG, Hit
from tests.support.stack import InProcessExecutor, eventually, test_config

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "mcp-test-token"


def stdio_server(**fields: Any) -> McpServerConfig:
    """The test server per key (in the sandbox: it may read this checkout and the
    interpreter), or with ``shared=True`` one process for every key."""
    place = (
        {"cwd": str(ROOT)} if fields.get("shared") else {"read_only": [str(ROOT), sys.base_prefix]}
    )
    return McpServerConfig(
        command=sys.executable,
        args=["-m", "tests.support.mcp_server", "stdio"],
        env={"PYTHONPATH": str(ROOT)},
        call_timeout_s=5,
        restart_max_delay_s=1,
        **place,
        **fields,
    )


@pytest.fixture(scope="module")
async def http_server() -> AsyncIterator[str]:
    """The HTTP server as a subprocess (one per module); it prints its port once it listens."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.mcp_server",
        "http",
        "--token",
        TOKEN,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(30):
            port = int(await process.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        await process.wait()


ARTICLE = b"""<html><head><title>Coffee ratios</title></head><body><nav>Home | Shop</nav>
<article><h1>Coffee ratios</h1><p>Use 60 grams of coffee per litre of water for a filter brew;
adjust by taste, a few grams either way.</p></article><footer>Copyright</footer></body></html>"""


@pytest.fixture
async def site() -> AsyncIterator[str]:
    """A web page the search points at (on loopback: the executor allows private targets)."""
    async with LocalSite({"/ratios": ("text/html; charset=utf-8", ARTICLE)}) as url:
        yield url + "ratios"


@pytest.fixture
async def searxng(site: str) -> AsyncIterator[FakeSearXNG]:
    hits = [Hit("Coffee ratios", site, "How much coffee per litre", "2026-02-03")]
    async with FakeSearXNG(hits) as fake:
        yield fake


@pytest.fixture
async def mcp_executor(
    gateway: RunningGateway,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
    http_server: str,
    searxng: FakeSearXNG,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[InProcessExecutor]:
    monkeypatch.setenv("MCP_TEST_TOKEN", TOKEN)  # the config names it, never holds it
    tools = ToolsConfig(
        mcp_servers={
            "local": stdio_server(),
            "common": stdio_server(shared=True),
            "remote": McpServerConfig(
                url=http_server,
                headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
                shared=True,
            ),
        },
        web_search=WebSearchConfig(provider="searxng", url=searxng.base_url),
        webfetch_allow_private=True,
    )
    presets = {
        # the shared servers' tools are offered only by presets that name them
        "shared": {"extends": "default", "allowed_tools": ["*", "remote__*", "common__*"]},
        "no-local": {"extends": "shared", "denied_tools": ["local__*"]},
        # the analyst's read-only tools (web_search among them) plus one MCP server's
        "researcher": {"extends": "analyst", "allowed_tools": [*READ_ONLY_TOOLS, "local__*"]},
    }
    config = test_config(nats_url, namespace, tools=tools, presets=presets)
    async with InProcessExecutor(
        nats_url, namespace, "exec-mcp", config=config, settings={"working_root": tmp_path}
    ) as running:
        yield running


async def run_script(
    client: httpx.AsyncClient, path: Path, calls: list[dict[str, Any]], **body: Any
) -> list[dict[str, Any]]:
    """A trace whose model makes ``calls`` in one turn, then answers; its tool messages."""
    model = write_script(path, [{"tool_calls": calls}, {"content": "done"}])
    created = await client.post(
        "/api/traces",
        json={"messages": [{"role": "user", "content": "use the tools"}], "model": model, **body},
    )
    assert created.status_code == 202, created.text
    trace_id = created.json()["trace_id"]
    events = await follow_until(client, trace_id, is_final)
    assert events[-1].event == "completed"
    return [m for m in await main_path(client, trace_id) if m["role"] == "tool"]


@pytest.mark.usefixtures("mcp_executor")
async def test_api_lists_mcp_tools_with_schema_and_origin(client: httpx.AsyncClient) -> None:
    listed = (await client.get("/api/tools")).json()
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert tools["read"]["origin"] == "builtin"
    assert tools["web_search"]["origin"] == "builtin" and tools["web_search"]["read_only"]
    add = tools["local__add"]
    assert add["origin"] == "mcp" and add["server"] == "local"
    assert add["input_schema"]["required"] == ["a", "b"]
    assert add["input_schema"]["properties"]["a"]["type"] == "integer"
    assert tools["remote__echo"]["server"] == "remote" and tools["remote__echo"]["shared"]
    assert not add["shared"]
    servers = {server["name"]: server for server in listed["mcp_servers"]}
    assert servers["local"]["state"] == "up" and servers["local"]["transport"] == "stdio"
    assert servers["local"]["scope"] == "key" and servers["common"]["scope"] is None
    assert servers["remote"]["state"] == "up" and servers["remote"]["transport"] == "http"
    assert listed["executors"] == ["exec-mcp"]


@pytest.mark.usefixtures("mcp_executor")
async def test_stdio_and_http_tools_answer_through_the_stack(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    results = await run_script(
        client,
        tmp_path / "calls.yaml",
        [
            {"name": "local__add", "arguments": {"a": 2, "b": 3}},
            {"name": "remote__echo", "arguments": {"text": "over http"}},
            {"name": "local__add", "arguments": {"a": "two", "b": 3}},
            {"name": "remote__fail", "arguments": {"reason": "no luck"}},
            {"name": "local__pixel", "arguments": {}},
        ],
        preset="shared",
    )
    added, echoed, invalid, failed, pixel = results
    assert '"sum": 5' in added["content"] and added["error_code"] is None
    assert echoed["content"] == "echo: over http"
    assert invalid["error_code"] == "tool_call_invalid"  # the server's schema applies
    assert failed["error_code"] == "mcp_tool_error" and "no luck" in failed["content"]
    assert "one red pixel" in pixel["content"]
    assert "image-1.png (image/png, 70 bytes)" in pixel["content"]


@pytest.mark.usefixtures("mcp_executor")
async def test_preset_patterns_deny_a_servers_tools(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    [denied, allowed] = await run_script(
        client,
        tmp_path / "denied.yaml",
        [
            {"name": "local__echo", "arguments": {"text": "x"}},
            {"name": "remote__echo", "arguments": {"text": "y"}},
        ],
        preset="no-local",
    )
    assert denied["error_code"] == "unknown_tool"
    assert allowed["content"] == "echo: y"


@pytest.mark.usefixtures("mcp_executor")
async def test_shared_servers_tools_only_for_presets_naming_them(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    shared = [
        {"name": "common__echo", "arguments": {"text": "x"}},
        {"name": "remote__echo", "arguments": {"text": "y"}},
    ]
    by_default = await run_script(client, tmp_path / "default.yaml", shared)
    assert [m["error_code"] for m in by_default] == ["unknown_tool", "unknown_tool"]
    # a client cannot name them in its own tool list either: it only narrows the preset's
    narrowed = await run_script(
        client, tmp_path / "narrowed.yaml", shared, tools=["common__echo", "remote__echo"]
    )
    assert [m["error_code"] for m in narrowed] == ["unknown_tool", "unknown_tool"]
    named = await run_script(client, tmp_path / "named.yaml", shared, preset="shared")
    assert [m["content"] for m in named] == ["echo: x", "echo: y"]


async def server_state(client: httpx.AsyncClient, name: str) -> dict[str, Any] | None:
    """The server's entry in ``/api/tools``; ``None`` while no live executor is listed (the
    gateway reads executors' presence with a short watch, which a loaded machine can miss)."""
    listed = (await client.get("/api/tools")).json()
    return next((server for server in listed["mcp_servers"] if server["name"] == name), None)


@pytest.mark.usefixtures("mcp_executor")
async def test_killed_stdio_server_is_a_tool_error_and_comes_back(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    [first] = await run_script(
        client,
        tmp_path / "pid.yaml",
        [{"name": "common__pid", "arguments": {}}],
        preset="shared",
    )
    pid = int(first["content"])
    os.kill(pid, signal.SIGKILL)
    [broken] = await run_script(
        client,
        tmp_path / "after.yaml",
        [{"name": "common__echo", "arguments": {"text": "?"}}],
        preset="shared",
    )
    assert broken["error_code"] in {"mcp_server_died", "mcp_unavailable"}
    assert "MCP server common" in broken["content"]

    async def restarted() -> bool:
        state = await server_state(client, "common")
        return state is not None and state["state"] == "up" and state["restarts"] >= 1

    await eventually(restarted, within=30, every=0.2)
    [again] = await run_script(
        client,
        tmp_path / "again.yaml",
        [{"name": "common__pid", "arguments": {}}],
        preset="shared",
    )
    assert again["error_code"] is None and int(again["content"]) != pid


@pytest.mark.usefixtures("mcp_executor")
async def test_research_scenario_search_read_compute_answer(
    client: httpx.AsyncClient, tmp_path: Path, site: str, searxng: FakeSearXNG
) -> None:
    """Search, read the page found, compute with an MCP tool, answer: through the stack."""
    model = write_script(
        tmp_path / "research.yaml",
        [
            {"tool_calls": [{"name": "web_search", "arguments": {"query": "coffee ratio"}}]},
            {"tool_calls": [{"name": "webfetch", "arguments": {"url": site}}]},
            {"tool_calls": [{"name": "local__add", "arguments": {"a": 60, "b": 3}}]},
            {"content": "Use about 60 g per litre (63 g for a stronger cup)."},
        ],
    )
    created = await client.post(
        "/api/traces",
        json={
            "messages": [{"role": "user", "content": "how much coffee per litre?"}],
            "model": model,
            "preset": "researcher",
        },
    )
    trace_id = created.json()["trace_id"]
    events = await follow_until(client, trace_id, is_final)
    assert events[-1].event == "completed"
    path = await main_path(client, trace_id)
    found, page, added = [m for m in path if m["role"] == "tool"]
    assert f"1. Coffee ratios (2026-02-03)\n   {site}" in found["content"]
    assert searxng.requests[0].query == {"q": "coffee ratio", "format": "json"}
    assert "# Coffee ratios" in page["content"] and "60 grams of coffee" in page["content"]
    assert "Copyright" not in page["content"]
    assert '"sum": 63' in added["content"]
    assert path[-1]["content"].startswith("Use about 60 g")


async def test_unconfigured_tools_are_not_offered(stack: RunningGateway) -> None:
    async with stack.client() as client:
        listed = (await client.get("/api/tools")).json()
    names = {tool["name"] for tool in listed["tools"]}
    assert "read" in names and "webfetch" in names
    assert "web_search" not in names and not any("__" in name for name in names)
    assert listed["mcp_servers"] == []
