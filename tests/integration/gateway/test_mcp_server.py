"""``/mcp`` driven by the official ``mcp`` SDK's client over streamable HTTP against a real
gateway and executor on a scripted model: start a run, follow it with progress until it asks,
answer it, read the answer and the transcript resource; two keys never see each other's runs;
a request without a key is refused with a challenge that says how to send one; both the server
and the stdio bridge advertise what they serve; a bridge the gateway refuses answers every
request with that error and keeps running."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx2
import pytest
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextResourceContents

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import KEY_A, KEY_B, RunningGateway

ASKS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "ask_human", "arguments": {"question": "which colour?"}}]},
    {"content": "blue it is"},
]


def stdio_bridge(gateway: RunningGateway, key: str) -> StdioServerParameters:
    """`longhaul mcp` as a desktop client launches it: a subprocess, the key in its env."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "longhaul.cli.main", "--url", gateway.url, "mcp"],
        env={"PATH": os.environ.get("PATH", ""), "LONGHAUL_API_KEY": key},
    )


@contextlib.asynccontextmanager
async def mcp_client(gateway: RunningGateway, key: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{gateway.url}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


def structured(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def drive_a_run_that_asks(client: Client, model: str) -> str:
    """start_run with progress (until it asks) → reply with progress → the answer."""
    steps: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    asked = structured(
        await client.call_tool(
            "start_run", {"prompt": "paint it", "model": model}, progress_callback=progress
        )
    )
    trace_id: str = asked["trace_id"]
    assert asked["viewer"].endswith(f"/#/traces/{trace_id}")
    assert (asked["status"], asked["question"]) == ("waiting", "which colour?")
    assert steps == ["calls ask_human", "waits for human"]
    now = structured(await client.call_tool("get_run", {"trace_id": trace_id}))
    assert now["question"] == "which colour?"
    answered = structured(
        await client.call_tool(
            "reply", {"trace_id": trace_id, "text": "blue"}, progress_callback=progress
        )
    )
    assert (answered["status"], answered["answer"]) == ("completed", "blue it is")
    assert steps[-2:] == ["answered", "completed"]
    return trace_id


async def test_start_answer_and_read_a_run_over_streamable_http(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(tmp_path / "ask.yaml", ASKS)
    async with mcp_client(keyed_stack, KEY_A) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert {"start_run", "get_run", "reply", "stop_run", "list_runs"} <= tools
        trace_id = await drive_a_run_that_asks(client, model)
        listed = structured(await client.call_tool("list_runs", {"status": "completed"}))
        assert trace_id in [run["trace_id"] for run in listed["result"]]
        read = await client.read_resource(f"longhaul://runs/{trace_id}/transcript")
        [contents] = read.contents
        assert isinstance(contents, TextResourceContents)
        assert "## assistant → ask_human" in contents.text
        assert contents.text.rstrip().endswith("## assistant\n\nblue it is")


async def test_stop_run_stops_a_waiting_run(keyed_stack: RunningGateway, tmp_path: Path) -> None:
    model = write_script(tmp_path / "stop.yaml", ASKS)
    async with mcp_client(keyed_stack, KEY_A) as client:
        started = structured(await client.call_tool("start_run", {"prompt": "x", "model": model}))

        async def ignore(progress: float, total: float | None, message: str | None) -> None:
            return None

        trace_id = started["trace_id"]
        await client.call_tool("get_run", {"trace_id": trace_id}, progress_callback=ignore)
        stopped = structured(
            await client.call_tool("stop_run", {"trace_id": trace_id}, progress_callback=ignore)
        )
        assert stopped["status"] == "stopped"
        now = structured(await client.call_tool("get_run", {"trace_id": trace_id}))
        assert now["status"] == "stopped"


async def test_two_keys_never_see_each_others_runs(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(tmp_path / "iso.yaml", ASKS)
    async with mcp_client(keyed_stack, KEY_A) as a:
        mine = structured(await a.call_tool("start_run", {"prompt": "mine", "model": model}))
    trace_id = mine["trace_id"]
    async with mcp_client(keyed_stack, KEY_B) as b:
        for tool, arguments in (
            ("get_run", {"trace_id": trace_id}),
            ("reply", {"trace_id": trace_id, "text": "hijack"}),
            ("stop_run", {"trace_id": trace_id}),
        ):
            refused = await b.call_tool(tool, arguments)
            assert refused.is_error, tool
            assert "not_found" in str(refused.content)
        assert structured(await b.call_tool("list_runs", {}))["result"] == []
        with pytest.raises(Exception, match="not_found"):
            await b.read_resource(f"longhaul://runs/{trace_id}/transcript")
    async with keyed_stack.client(KEY_A) as http:
        view = (await http.get(f"/api/traces/{trace_id}")).json()
    assert view["status"] != "stopped"


async def test_a_request_without_a_valid_key_is_refused(keyed_stack: RunningGateway) -> None:
    for key in (None, "not-a-key"):
        with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces the 401 its own way
            async with mcp_client(keyed_stack, key) as client:
                await client.list_tools()
    async with httpx2.AsyncClient(timeout=10) as http:
        refused = await http.post(
            f"{keyed_stack.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert refused.status_code == 401
    assert refused.json()["error"]["message"].startswith("unauthorized")


async def test_the_stdio_bridge_serves_the_same_tools_per_key(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(tmp_path / "stdio.yaml", ASKS)
    async with Client(stdio_bridge(keyed_stack, KEY_A)) as client:
        trace_id = await drive_a_run_that_asks(client, model)
        read = await client.read_resource(f"longhaul://runs/{trace_id}/transcript")
        assert "blue it is" in str(read.contents[0])
    async with Client(stdio_bridge(keyed_stack, KEY_B)) as other:
        refused = await other.call_tool("get_run", {"trace_id": trace_id})
        assert refused.is_error and "not_found" in str(refused.content)
        assert structured(await other.call_tool("list_runs", {}))["result"] == []


async def test_bad_input_gets_the_protocols_errors(keyed_stack: RunningGateway) -> None:
    async with mcp_client(keyed_stack, KEY_A) as client:
        unknown = await client.call_tool("get_run", {"trace_id": "t_unknown"})
        assert unknown.is_error and "not_found" in str(unknown.content)
        bad_name = await client.call_tool(
            "start_run", {"prompt": "x", "files": {"../escape": "no"}}
        )
        assert bad_name.is_error and "invalid_file_name" in str(bad_name.content)
        bad_preset = await client.call_tool("start_run", {"prompt": "x", "preset": "nope"})
        assert bad_preset.is_error and "no preset" in str(bad_preset.content)
        with pytest.raises(MCPError):
            await client.read_resource("longhaul://runs/t_unknown/transcript")


async def test_the_server_says_what_it_serves_and_how_to_send_a_key(
    keyed_stack: RunningGateway,
) -> None:
    async with mcp_client(keyed_stack, KEY_A) as client:
        assert client.server_info is not None
        assert client.server_info.version == version("longhaul-gateway")
        served = client.server_capabilities
        assert served.tools is not None and served.resources is not None
        assert served.prompts is None  # none are served
        with pytest.raises(MCPError) as no_prompts:
            await client.get_prompt("nope")
        assert no_prompts.value.error.code == -32601  # method not found, not 0
        for tool in (await client.list_tools()).tools:
            description = tool.description or ""
            assert description == inspect.cleandoc(description), tool.name
            assert "\n    " not in description
    async with httpx2.AsyncClient(base_url=keyed_stack.url, timeout=10) as http:
        for key in (None, "not-a-key"):
            headers = {"Accept": "application/json, text/event-stream"}
            if key:
                headers["Authorization"] = f"Bearer {key}"
            refused = await http.post(
                "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers
            )
            assert refused.status_code == 401
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith('Bearer realm="longhaul", error="invalid_token", ')
            assert "error_description=" in challenge and "Authorization: Bearer" in challenge
            assert "resource_metadata" not in challenge  # no OAuth is offered
        metadata = await http.get("/.well-known/oauth-protected-resource")
        assert metadata.status_code == 404


async def test_the_stdio_bridge_advertises_resources_and_its_version(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    async with Client(stdio_bridge(keyed_stack, KEY_A)) as client:
        assert client.server_info is not None
        assert client.server_info.version == version("longhaul-cli")
        served = client.server_capabilities
        assert served.resources is not None and served.prompts is None
        assert (await client.list_resources()).resources == []
        [template] = (await client.list_resource_templates()).resource_templates
        assert template.uri_template == "longhaul://runs/{trace_id}/transcript"


async def test_the_stdio_bridge_refused_by_the_gateway_answers_errors_and_keeps_running(
    keyed_stack: RunningGateway,
) -> None:
    # a wrong key, through the official client: its first request fails with what to fix
    async with Client(stdio_bridge(keyed_stack, "not-a-key")) as refused:
        with pytest.raises(MCPError) as wrong:
            await refused.list_tools()
    assert "invalid API key" in wrong.value.error.message
    assert "LONGHAUL_API_KEY" in wrong.value.error.message

    # no key at all, on the wire: every request answered, the process still up
    bridge = stdio_bridge(keyed_stack, "")
    process = await asyncio.create_subprocess_exec(
        bridge.command,
        *bridge.args,
        env={"PATH": os.environ.get("PATH", "")},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    initialize = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    answers = []
    for n, (method, params) in enumerate(
        [("initialize", initialize), ("tools/list", {}), ("resources/list", {})]
    ):
        line = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        process.stdin.write(json.dumps(line).encode() + b"\n")
        await process.stdin.drain()
        answers.append(json.loads(await asyncio.wait_for(process.stdout.readline(), 60)))
    assert process.returncode is None
    assert [a["id"] for a in answers] == [0, 1, 2]
    for answer in answers:
        assert answer["error"]["code"] == -32001
        assert "missing API key" in answer["error"]["message"]
        assert "LONGHAUL_API_KEY" in answer["error"]["message"]
    process.stdin.close()
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0 and b"Traceback" not in stderr, stderr.decode()


async def test_start_run_files_are_there_before_the_first_model_call(
    keyed_stack: RunningGateway, store: EventStore, tmp_path: Path
) -> None:
    """The files come with the trace's creation (not uploaded after it, a race with the
    first model call)."""
    model = write_script(
        tmp_path / "reads.yaml",
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": "notes.md"}}]},
            {"content": "read"},
        ],
    )

    async def ignore(progress: float, total: float | None, message: str | None) -> None:
        return None

    async with mcp_client(keyed_stack, KEY_A) as client:
        done = structured(
            await client.call_tool(
                "start_run",
                {"prompt": "read notes.md", "model": model, "files": {"notes.md": "n-42"}},
                progress_callback=ignore,
            )
        )
        assert done["status"] == "completed", done
    async with keyed_stack.client(KEY_A) as http:
        path = (await http.get(f"/api/traces/{done['trace_id']}/messages")).json()["messages"]
    [read] = [m for m in path if m["role"] == "tool"]
    assert "n-42" in str(read["content"])
    async for first in store.replay("trace", done["trace_id"]):
        assert isinstance(first.event, ev.TraceCreated)
        assert [f.name for f in first.event.files] == ["notes.md"]
        break
