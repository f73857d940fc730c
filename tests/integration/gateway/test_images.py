"""Images in user messages through the stack: the gateway stores a large ``data:`` URL in the
workspace and the event names it; the executor puts it back before the model call, so the
(fake) Anthropic API receives the whole image while the log stays small. A key that names
another key's image gets a note that it is unavailable, never the image."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from longhaul.agent.images import SCHEME
from longhaul.core.config import NatsConfig

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.integration.gateway.test_full_stack import follow_until, is_final, main_path
from tests.support.llm_fakes import FakeAnthropic, Reply
from tests.support.stack import InProcessExecutor, test_config

KEYS = ["key-alice-images", "key-mallory-images"]
IMAGE = base64.b64encode(os.urandom(60_000)).decode()  # ~80 KB of base64
DATA_URL = f"data:image/png;base64,{IMAGE}"
MODEL = "anthropic:fake-model"


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(default=Reply(text="a noisy picture")) as fake:
        yield fake


@pytest.fixture
async def keyed_gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config, api_keys=KEYS)) as running:
        yield running


@pytest.fixture
async def image_executor(
    keyed_gateway: RunningGateway,
    nats_url: str,
    namespace: str,
    tmp_path: Path,
    anthropic: FakeAnthropic,
) -> AsyncIterator[InProcessExecutor]:
    config = test_config(nats_url, namespace, models=anthropic.models_config())
    async with InProcessExecutor(
        nats_url, namespace, "exec-images", config=config, settings={"working_root": tmp_path}
    ) as running:
        yield running


def image_message(url: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in this picture?"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }


async def run(client: httpx.AsyncClient, url: str) -> str:
    created = await client.post(
        # named: an unnamed trace would also ask the (fake) utility model for a title
        "/api/traces",
        json={"messages": [image_message(url)], "model": MODEL, "name": "picture"},
    )
    assert created.status_code == 202, created.text
    trace_id: str = created.json()["trace_id"]
    events = await follow_until(client, trace_id, is_final)
    assert events[-1].event == "completed"
    return trace_id


@pytest.mark.usefixtures("image_executor")
async def test_a_large_image_reaches_the_model_but_not_the_log(
    keyed_gateway: RunningGateway, anthropic: FakeAnthropic
) -> None:
    async with keyed_gateway.client(KEYS[0]) as alice:
        trace_id = await run(alice, DATA_URL)
        [first, *_] = await main_path(alice, trace_id)
    stored = first["content"][1]["image_url"]["url"]
    digest = hashlib.sha256(DATA_URL.encode()).hexdigest()
    assert stored == SCHEME + digest  # the event names the image
    blocks = anthropic.requests[0].json["messages"][0]["content"]
    [image] = [block for block in blocks if block["type"] == "image"]
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": IMAGE}


@pytest.mark.usefixtures("image_executor")
async def test_another_key_cannot_name_someone_elses_image(
    keyed_gateway: RunningGateway, anthropic: FakeAnthropic
) -> None:
    async with keyed_gateway.client(KEYS[0]) as alice:
        await run(alice, DATA_URL)
    reference = SCHEME + hashlib.sha256(DATA_URL.encode()).hexdigest()
    async with keyed_gateway.client(KEYS[1]) as mallory:
        await run(mallory, reference)
    sent = anthropic.requests[-1].json["messages"][0]["content"]
    assert not [block for block in sent if block["type"] == "image"]
    assert any("no longer available" in block.get("text", "") for block in sent)
    assert IMAGE not in str(sent)
