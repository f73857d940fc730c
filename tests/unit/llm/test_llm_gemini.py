"""The gemini: provider against a fake generativelanguage API on loopback."""

from __future__ import annotations

import json

import pytest
from longhaul.llm import ModelError, ModelRegistry, ModelRequest, TextDelta, ToolSpec

from tests.support.llm_fakes import Call, FakeGemini, Reply
from tests.unit.llm.conftest import drain

TOOLS = [
    ToolSpec(
        name="lookup", parameters={"type": "object", "properties": {"key": {"type": "string"}}}
    ),
    ToolSpec(name="clock"),
]


def request(messages: list[dict[str, object]], **kwargs: object) -> ModelRequest:
    return ModelRequest(model="gemini:gemini-2.5-flash", messages=messages, tools=TOOLS, **kwargs)  # type: ignore[arg-type]


async def test_text_stream_system_instruction_and_usage(registry: ModelRegistry) -> None:
    reply = Reply(
        text="Bonjour tout le monde",
        chunk=5,
        prompt_tokens=40,
        cached_tokens=30,
        completion_tokens=6,
    )
    async with FakeGemini([reply]) as server:
        model = registry.resolve("gemini:gemini-2.5-flash", server.models_config())
        events = await drain(
            model,
            request(
                [{"role": "user", "content": "hi"}],
                system_stable="RULES",
                system_volatile="NOW",
                temperature=0.1,
            ),
        )
    assert len([e for e in events if isinstance(e, TextDelta)]) == 5
    response = events[-1].response  # type: ignore[union-attr]
    assert response.content == "Bonjour tout le monde" and response.finish_reason == "stop"
    assert (
        response.usage.prompt_tokens,
        response.usage.cache_read_tokens,
        response.usage.completion_tokens,
    ) == (40, 30, 6)
    sent = server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert sent.query == {"alt": "sse"} and sent.headers["x-goog-api-key"] == "test-key"
    body = sent.json
    # Stable instruction only; the volatile note after the conversation.
    assert body["systemInstruction"] == {"parts": [{"text": "RULES"}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "hi"}, {"text": "<context>\nNOW\n</context>"}]}
    ]
    assert body["tools"][0]["functionDeclarations"][0]["name"] == "lookup"
    assert body["generationConfig"] == {"temperature": 0.1}


async def test_parallel_calls_pair_with_responses_and_signatures_round_trip(
    registry: ModelRegistry,
) -> None:
    calls = [Call("lookup", {"key": "a"}), Call("clock")]
    script = [
        Reply(tool_calls=calls, thought_signature="c2lnbmF0dXJlLTE="),
        Reply(text="done", thought_signature="dGV4dC1zaWc="),
    ]
    async with FakeGemini(script) as server:
        model = registry.resolve("gemini:gemini-2.5-flash", server.models_config())
        conversation: list[dict[str, object]] = [{"role": "user", "content": "go"}]
        first = await model.complete(request(conversation))
        assert first.finish_reason == "tool_calls"
        assert [c.name for c in first.tool_calls] == ["lookup", "clock"]
        assert json.loads(first.tool_calls[0].arguments) == {"key": "a"}
        assert first.provider_fields["gemini"]["signatures"] == {
            call.id: "c2lnbmF0dXJlLTE=" for call in first.tool_calls
        }
        lookup, clock = first.tool_calls
        conversation += [
            first.to_message(),
            {"role": "tool", "tool_call_id": clock.id, "content": "12:00"},
            {"role": "tool", "tool_call_id": lookup.id, "content": "A!", "error": "x"},
        ]
        second = await model.complete(request(conversation))
        assert second.provider_fields["gemini"]["text_signature"] == "dGV4dC1zaWc="
    model_turn, responses = server.requests[1].json["contents"][1:]
    assert [p["thoughtSignature"] for p in model_turn["parts"]] == ["c2lnbmF0dXJlLTE="] * 2
    assert responses == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "lookup", "response": {"error": "A!"}}},
            {"functionResponse": {"name": "clock", "response": {"result": "12:00"}}},
        ],
    }


async def test_generated_call_ids_are_deterministic(registry: ModelRegistry) -> None:
    reply = Reply(tool_calls=[Call("lookup", {"key": "k"})])
    async with FakeGemini([reply, reply]) as server:
        model = registry.resolve("gemini:gemini-2.5-flash", server.models_config())
        messages: list[dict[str, object]] = [{"role": "user", "content": "x"}]
        first = await model.complete(request(messages))
        second = await model.complete(request(messages))
    assert first.tool_calls[0].id == second.tool_calls[0].id
    assert first.tool_calls[0].id.startswith("call_")


async def test_lost_thought_signature_is_rejected_like_gemini_3(registry: ModelRegistry) -> None:
    async with FakeGemini(
        [Reply(tool_calls=[Call("clock")], thought_signature="c2ln"), Reply(text="x")]
    ) as server:
        model = registry.resolve("gemini:gemini-3-pro-preview", server.models_config())
        conversation: list[dict[str, object]] = [{"role": "user", "content": "time?"}]
        first = await model.complete(request(conversation))
        message = first.to_message()
        del message["provider_fields"]
        conversation += [
            message,
            {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "noon"},
        ]
        with pytest.raises(ModelError, match="missing a thought_signature") as caught:
            await model.complete(request(conversation))
    assert caught.value.status == 400


async def test_unpaired_function_call_gets_the_real_400(registry: ModelRegistry) -> None:
    history: list[dict[str, object]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "clock", "arguments": "{}"},
                }
            ],
        },
        {"role": "user", "content": "hello?"},
    ]
    async with FakeGemini([Reply(text="x")]) as server:
        model = registry.resolve("gemini:gemini-2.5-pro", server.models_config())
        with pytest.raises(ModelError, match="number of function response parts") as caught:
            await model.complete(request(history))
    assert caught.value.status == 400 and not caught.value.retryable


async def test_native_json_mode_only_without_tools(registry: ModelRegistry) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    async with FakeGemini([Reply(text='{"n": 1}'), Reply(text='{"n": 2}')]) as server:
        model = registry.resolve("gemini:gemini-2.5-pro", server.models_config())
        messages: list[dict[str, object]] = [{"role": "user", "content": "n?"}]
        await model.complete(
            ModelRequest(model=model.name, messages=messages, response_schema=schema, max_tokens=64)
        )
        await model.complete(request(messages, response_schema=schema))
    plain, with_tools = (r.json for r in server.requests)
    assert plain["generationConfig"] == {
        "maxOutputTokens": 64,
        "responseMimeType": "application/json",
        "responseJsonSchema": schema,
    }
    assert "generationConfig" not in with_tools
    assert '"n"' in with_tools["contents"][-1]["parts"][-1]["text"]
