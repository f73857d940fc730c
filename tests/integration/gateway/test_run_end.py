"""The end of a run through the stack (gateway, in-process executor, nats-server): a trace
created without a name is titled by the utility model (an OpenAI-wire fake here) once its
first run ends, the first message standing in until then and when no title comes; with
``memory.capture_on_completion`` a completing run first reflects into experiences of its key,
recorded as ``experiences_captured``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.domain.config import MemoryConfig

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    SseEvent,
    gateway_config,
    serve_gateway,
    sse_events,
    user_message,
)
from tests.support.llm_fakes import Fail, FakeOpenAI, RecordedRequest, Reply
from tests.support.stack import InProcessExecutor, test_config

KEY_A, KEY_B = "key-a-run-end-0123456789", "key-b-run-end-9876543210"
DEADLINE_S = 30
ASKED = "Please could you tell me what the weather will be like in Paris today and tomorrow?"
LESSON = {
    "category": "environment",
    "tags": {"intent": ["weather_lookup"], "state": ["no_network"]},
    "content": "When asked about the weather without network access, say so at once.",
}


def is_title_request(request: RecordedRequest) -> bool:
    return "You name conversations" in json.dumps(request.json["messages"])


def utility(request: RecordedRequest) -> Reply | Fail:
    if "no title today" in json.dumps(request.json["messages"]):
        return Fail(400, "this request is refused")
    return Reply(text='"Weather in Paris."\n')


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI(default=utility) as server:
        yield server


@pytest.fixture
async def keyed(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")) as gw:
        yield gw


@pytest.fixture
async def executor(
    keyed: RunningGateway, fake: FakeOpenAI, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[InProcessExecutor]:
    models = fake.models_config().model_copy(update={"roles": {"utility": "openai:fake-model"}})
    memory = MemoryConfig(capture_on_completion=True)
    config = test_config(nats_url, namespace, models=models, memory=memory)
    async with InProcessExecutor(
        nats_url, namespace, "exec-run-end", config=config, settings={"working_root": tmp_path}
    ) as running:
        yield running


async def follow(
    client: httpx.AsyncClient, trace_id: str, done: Callable[[SseEvent], bool]
) -> list[SseEvent]:
    seen: list[SseEvent] = []
    async with (
        asyncio.timeout(DEADLINE_S),
        client.stream("GET", f"/api/traces/{trace_id}/events") as response,
    ):
        async for event in sse_events(response):
            if event.id is not None:
                seen.append(event)
                if done(event):
                    return seen
    raise AssertionError("stream ended early")


def titled(event: SseEvent) -> bool:
    return event.event == "trace_titled"


async def create(client: httpx.AsyncClient, text: str, model: str, **fields: Any) -> str:
    body = {"messages": [user_message(text)], "model": model, **fields}
    created = await client.post("/api/traces", json=body)
    assert created.status_code == 202, created.text
    return str(created.json()["trace_id"])


@pytest.mark.usefixtures("executor")
async def test_a_run_ends_titled_and_with_what_it_learned(
    keyed: RunningGateway, fake: FakeOpenAI, tmp_path: Path
) -> None:
    answer = "I cannot look the weather up from here; try a forecast site."
    model = write_script(
        tmp_path / "weather.yaml",
        [{"content": answer}, {"content": json.dumps({"experiences": [LESSON]})}],
    )
    async with keyed.client(KEY_A) as alice, keyed.client(KEY_B) as bob:
        trace_id = await create(alice, ASKED, model)
        events = await follow(alice, trace_id, titled)
        kinds = [e.event for e in events]
        # the reflection runs before the run completes; the title comes once it has ended
        assert kinds.index("experiences_captured") < kinds.index("completed") < len(kinds) - 1
        assert events[-1].json()["name"] == "Weather in Paris"
        assert events[0].json()["untitled"] is True
        assert events[0].json()["name"] == ASKED[:59] + "…"  # the stand-in
        view = (await alice.get(f"/api/traces/{trace_id}")).json()
        assert view["name"] == "Weather in Paris" and view["summary"] == answer
        async with asyncio.timeout(DEADLINE_S):  # the index (listings) carries it too
            await keyed.runtime.mirror.wait_until(
                lambda m: m.entries[trace_id].name == "Weather in Paris"
            )

        # what the run learned is the key's, recorded on the log with its ids
        [captured] = [e.json() for e in events if e.event == "experiences_captured"]
        [learned] = (await alice.get("/api/experiences")).json()["experiences"]
        assert captured["ids"] == [learned["id"]] and captured["run"] == 1
        assert learned["content"] == LESSON["content"] and learned["trace_id"] == trace_id
        assert (await bob.get("/api/experiences")).json()["experiences"] == []
        main = (await alice.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        assert main[-1]["content"] == answer  # the reflection stayed on its side branch

        # the utility model read the request and the answer, once
        [asked] = [r.json for r in fake.requests if is_title_request(r)]
        shown = asked["messages"][-1]["content"]
        assert ASKED in shown and answer in shown

        # a named trace is not retitled; a trace with experiences off captures nothing; a
        # refused title keeps the stand-in, with the reason on the log
        plain = write_script(tmp_path / "plain.yaml", [{"content": "done"}])
        named = await create(alice, "a named one", plain, name="mine", experiences=False)
        refused = await create(alice, "no title today", plain, experiences=False)
        events = await follow(alice, refused, titled)
        assert "experiences_captured" not in [e.event for e in events]
        assert events[-1].json()["error"].startswith("utility model failed")
        assert (await alice.get(f"/api/traces/{refused}")).json()["name"] == "no title today"
        named_events = await follow(alice, named, lambda e: e.event == "completed")
        assert "trace_titled" not in [e.event for e in named_events]
        assert (await alice.get(f"/api/traces/{named}")).json()["name"] == "mine"
    assert sum(map(is_title_request, fake.requests)) == 2
    assert fake.rejected == []
