"""``/v1`` function calling against the real llama.cpp server: OpenAI's client offers its own
tool, the server's model calls it (steered into its tool grammar by the proxy on the first
round, as every real_model tool test), the completion hands the call back as ``tool_calls``,
and the client's result continues the same trace to a text answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from longhaul.core.config import NatsConfig
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from tests.real_model.conftest import real_stack
from tests.support.llama import SteeringProxy

pytestmark = pytest.mark.real_model

WEATHER: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


async def test_the_real_server_calls_the_clients_tool_through_v1(
    nats_config: NatsConfig, namespace: str, tmp_path: Path, proxy: SteeringProxy
) -> None:
    first_seen = len(proxy.seen)
    async with real_stack(nats_config, namespace, tmp_path, proxy, steer_rounds=1) as gateway:
        client = AsyncOpenAI(
            base_url=f"{gateway.url}/v1", api_key="local", max_retries=0, timeout=200
        )
        asked: list[ChatCompletionMessageParam] = [
            {"role": "user", "content": "What is the weather in Paris?"}
        ]
        # one call per response: llama.cpp's grammar then ends the turn after it
        first = await client.chat.completions.create(
            model="openai:smollm2",
            messages=asked,
            tools=[WEATHER],
            parallel_tool_calls=False,
            temperature=0,
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        [call] = choice.message.tool_calls or []
        assert call.type == "function" and call.function.name == "get_weather"
        assert json.loads(call.function.arguments)["city"] in {"Paris", "Oslo"}
        reply: Any = choice.message.model_dump(exclude_none=True)
        # the result, and tool_choice none: the unsteered model answers in text
        second = await client.chat.completions.create(
            model="openai:smollm2",
            messages=[
                *asked,
                reply,
                {"role": "tool", "tool_call_id": call.id, "content": "sunny, 22 C"},
            ],
            tools=[WEATHER],
            tool_choice="none",
            temperature=0,
        )
    assert (second.model_extra or {})["trace_id"] == (first.model_extra or {})["trace_id"]
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content
    seen = proxy.seen[first_seen:]
    assert not [s for s in seen if s.status >= 400], [(s.status, s.error) for s in seen]
    offered = [tool["function"]["name"] for tool in seen[0].body["tools"]]
    assert offered == ["get_weather"] and seen[0].body["parallel_tool_calls"] is False
    assert seen[1].body["tool_choice"] == "none"
