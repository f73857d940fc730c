"""Skills through the stack (gateway, in-process executor, an OpenAI-wire fake model): the
skills listing in the request the model gets, a body loaded with the ``skill`` tool, the
trace's ``skills`` and ``agent(skills=…)`` honoured on the wire, and the ``browser`` preset
with its shipped ``browser`` skill driving the system Chromium against a local page."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.agent.skills import BUILTIN_SKILLS_DIR
from longhaul.domain.config import ToolsConfig

from tests.integration.gateway.harness import RunningGateway, sse_events, user_message
from tests.support.llm_fakes import Call, FakeOpenAI, RecordedRequest, Reply
from tests.support.pages import LocalSite
from tests.support.stack import InProcessExecutor, test_config

DEADLINE_S = 60
LEASE_TTL_S = 15
"""With the tests' usual 2 s lease the browser turn lost its lease while Chromium started (the
executor shares this event loop; measured on a machine at load 10), and was retried forever."""
LISTING = "Skills (load one with the `skill` tool before following it):"
PAGE = b"""<html><head><title>Opening hours</title></head><body>
<h1>Open 9 to 5</h1><a href="/page">contact</a></body></html>"""


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def executor(
    gateway: RunningGateway, fake: FakeOpenAI, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[InProcessExecutor]:
    config = test_config(
        nats_url,
        namespace,
        models=fake.models_config(),
        tools=ToolsConfig(webfetch_allow_private=True),  # the page is on loopback
        lease_ttl_s=LEASE_TTL_S,
    )
    async with InProcessExecutor(
        nats_url,
        namespace,
        "exec-skills",
        config=config,
        settings={"working_root": tmp_path},
        lease_ttl_s=LEASE_TTL_S,
    ) as running:
        yield running


def system_of(request: RecordedRequest) -> str:
    return "\n".join(str(m["content"]) for m in request.json["messages"] if m["role"] == "system")


def listed(request: RecordedRequest) -> set[str]:
    """The skill names the request's system prompt lists."""
    lines = system_of(request).split(LISTING, 1)[1].strip().splitlines()
    return {line[2:].split(":", 1)[0] for line in lines if line.startswith("- ")}


def offered(request: RecordedRequest) -> set[str]:
    return {tool["function"]["name"] for tool in request.json.get("tools", [])}


def tool_results(request: RecordedRequest) -> list[str]:
    return [str(m["content"]) for m in request.json["messages"] if m["role"] == "tool"]


async def run(client: httpx.AsyncClient, **body: Any) -> str:
    # named: an unnamed trace would also ask the (fake) utility model for a title
    body = {"model": "openai:fake-model", "name": "skills", **body}
    created = await client.post("/api/traces", json=body)
    assert created.status_code == 202, created.text
    trace_id: str = created.json()["trace_id"]
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream("GET", f"/api/traces/{trace_id}/events") as response,
    ):
        async for event in sse_events(response):
            if event.event in ("completed", "failed", "stopped"):
                assert event.event == "completed", event.data
                return trace_id
    raise AssertionError("stream ended early")


@pytest.mark.usefixtures("executor")
async def test_the_listing_a_loaded_body_and_the_trace_and_agent_skills_lists(
    client: httpx.AsyncClient, fake: FakeOpenAI
) -> None:
    fake.script = [
        Reply(tool_calls=[Call("skill", {"name": "research"})]),
        Reply(tool_calls=[Call("agent", {"task": "list the sources", "skills": ["web"]})]),
        Reply(text="two sources"),  # the child
        Reply(text="done"),  # the parent again
    ]
    parent = await run(client, messages=[user_message("research it")], skills=["research"])
    first, loaded, child, last = fake.requests
    assert fake.rejected == []
    # the trace's list: only research is listed, and the body comes back from the tool
    assert listed(first) == {"research"} and "skill" in offered(first)
    research = (BUILTIN_SKILLS_DIR / "research.md").read_text().split("\n---", 1)[1].strip()
    assert research.splitlines()[0] in tool_results(loaded)[-1]
    # agent(skills=…): the child is shown web alone, whatever its parent had
    assert "list the sources" in json.dumps(child.json["messages"])
    assert listed(child) == {"web"}
    view = (await client.get(f"/api/traces/{parent}")).json()
    [sub] = view["sub_traces"]
    context = (await client.get(f"/api/traces/{sub['trace_id']}/context")).json()
    assert context["skills"] == ["web"]
    assert listed(last) == {"research"}
    # without a list (and the default preset, which names none) every skill is listed
    fake.script = [Reply(text="hello")]
    await run(client, messages=[user_message("hi")])
    shipped = {path.stem for path in BUILTIN_SKILLS_DIR.glob("*.md")}
    assert listed(fake.requests[-1]) == shipped >= {"planning", "research", "web", "browser"}


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs the system chromium")
@pytest.mark.usefixtures("executor")
async def test_the_browser_preset_loads_its_skill_and_drives_chromium(
    client: httpx.AsyncClient, fake: FakeOpenAI
) -> None:
    async with LocalSite({"/hours": ("text/html", PAGE)}) as url:
        fake.script = [
            Reply(tool_calls=[Call("skill", {"name": "browser"})]),
            Reply(tool_calls=[Call("browser_navigate", {"url": url + "hours"})]),
            Reply(tool_calls=[Call("browser_snapshot")]),
            Reply(text="They open 9 to 5."),
        ]
        await run(client, messages=[user_message("when are they open?")], preset="browser")
    first, loaded, navigated, snapped = fake.requests
    assert fake.rejected == []
    # the preset's skills (browser, web) are listed and its browser tools offered
    assert listed(first) == {"browser", "web"}
    assert {"browser_navigate", "browser_snapshot", "skill"} <= offered(first)
    assert "# Working a page in the browser" in tool_results(loaded)[-1]
    assert tool_results(navigated)[-1].startswith("HTTP 200: Opening hours")
    assert 'heading "Open 9 to 5"' in tool_results(snapped)[-1]
