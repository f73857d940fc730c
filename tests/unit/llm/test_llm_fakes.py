"""The fake servers' non-streaming answers and timeouts (what other suites may rely on)."""

from __future__ import annotations

import httpx
import pytest
from longhaul.llm import ModelError, ModelRegistry, ModelRequest, RetryNotice

from tests.support.llm_fakes import Call, FakeAnthropic, FakeGemini, FakeOpenAI, Reply
from tests.unit.llm.conftest import drain

REPLY = Reply(text="hello", tool_calls=[Call("f", {"x": 1})])
USER = [{"role": "user", "content": "hi"}]


async def test_openai_non_streaming_completion() -> None:
    async with FakeOpenAI([REPLY]) as server, httpx.AsyncClient() as client:
        answer = await client.post(
            f"{server.base_url}/chat/completions",
            headers={"Authorization": f"Bearer {server.api_key}"},
            json={"model": "m", "messages": USER},
        )
    body = answer.json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["content"] == "hello"
    assert message["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"x": 1}'}
    assert body["usage"]["total_tokens"] == 120


async def test_anthropic_non_streaming_message() -> None:
    async with FakeAnthropic([REPLY]) as server, httpx.AsyncClient() as client:
        answer = await client.post(
            f"{server.base_url}/v1/messages",
            headers={"x-api-key": server.api_key, "anthropic-version": "2023-06-01"},
            json={"model": "m", "max_tokens": 5, "messages": USER},
        )
    body = answer.json()
    assert [block["type"] for block in body["content"]] == ["text", "tool_use"]
    assert body["stop_reason"] == "tool_use" and body["usage"]["output_tokens"] == 20


async def test_gemini_generate_content() -> None:
    async with FakeGemini([REPLY]) as server, httpx.AsyncClient() as client:
        answer = await client.post(
            f"{server.base_url}/models/gemini-2.5-flash:generateContent",
            headers={"x-goog-api-key": server.api_key},
            json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        )
    candidate = answer.json()["candidates"][0]
    assert candidate["content"]["parts"] == [
        {"text": "hello"},
        {"functionCall": {"name": "f", "args": {"x": 1}}},
    ]
    assert candidate["finishReason"] == "STOP"


async def test_a_stalled_stream_times_out_and_is_retried(registry: ModelRegistry) -> None:
    stalled = Reply(text="late", interval_s=0.3)
    async with FakeOpenAI([stalled, stalled]) as server:
        config = server.models_config(read_timeout_s=0.05, max_retries=1)
        model = registry.resolve("openai:gpt-4o", config)
        events = []
        with pytest.raises(ModelError, match="timeout"):
            async for event in model.stream(ModelRequest(model=model.name, messages=USER)):
                events.append(event)
    assert [type(e) for e in events] == [RetryNotice]
    assert events[0].reason.startswith("timeout")  # type: ignore[union-attr]
    assert len(server.requests) == 2


async def test_script_exhaustion_and_default() -> None:
    async with FakeOpenAI(default=Reply(text="again")) as server:
        async with ModelRegistry(env={}) as registry:
            model = registry.resolve("openai:m", server.models_config())
            request = ModelRequest(model=model.name, messages=USER)
            assert [(await model.complete(request)).content for _ in range(2)] == ["again"] * 2
    async with FakeOpenAI() as server, ModelRegistry(env={}) as registry:
        model = registry.resolve("openai:m", server.models_config())
        with pytest.raises(ModelError, match="script exhausted"):
            await drain(model, ModelRequest(model=model.name, messages=USER))
