"""``/v1`` driven by OpenAI's own Python client against a real gateway and executor on a
scripted model: models, a completion, a streamed follow-up that continues the same trace, a
question answered by the next message, two API keys that never see each other's runs, and
refusals in OpenAI's error shape."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from longhaul.domain.config import NatsConfig
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageParam,
    ChatCompletionUserMessageParam,
)

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    KEY_A,
    KEY_B,
    RunningGateway,
    gateway_config,
    serve_gateway,
)


def user(text: str) -> ChatCompletionUserMessageParam:
    return {"role": "user", "content": text}


def assistant(text: str | None) -> ChatCompletionAssistantMessageParam:
    return {"role": "assistant", "content": text}


def client_for(gateway: RunningGateway, key: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0, timeout=60)


async def test_completion_then_streamed_follow_up_continue_one_trace(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "chat.yaml",
        [{"content": "hello, I am longhaul"}, {"content": "the second answer, streamed"}],
    )
    client = client_for(keyed_stack, KEY_A)
    assert "longhaul/default" in [m.id async for m in client.models.list()]

    first: list[ChatCompletionMessageParam] = [user("hi")]
    raw = await client.chat.completions.with_raw_response.create(model=model, messages=first)
    completion = raw.parse()
    answer = completion.choices[0].message.content
    assert answer == "hello, I am longhaul"
    trace_id = raw.headers["x-longhaul-trace-id"]
    assert (completion.model_extra or {})["trace_id"] == trace_id

    follow_up = [
        *first,
        assistant(answer),
        user("more"),
    ]
    stream = await client.chat.completions.with_raw_response.create(
        model=model, messages=follow_up, stream=True
    )
    assert stream.headers["x-longhaul-trace-id"] == trace_id
    chunks = stream.parse()
    assert isinstance(chunks, AsyncStream)
    pieces = [c.choices[0].delta.content or "" async for c in chunks]
    assert "".join(pieces) == "the second answer, streamed"

    async with keyed_stack.client(KEY_A) as http:
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert [m["content"] for m in path if m["role"] == "user"] == ["hi", "more"]


async def test_a_question_is_the_reply_and_the_next_message_answers_it(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(
        tmp_path / "ask.yaml",
        [
            {"tool_calls": [{"name": "ask_human", "arguments": {"question": "which colour?"}}]},
            {"content": "blue it is"},
        ],
    )
    client = client_for(keyed_stack, KEY_A)
    asked: list[ChatCompletionMessageParam] = [user("paint it")]
    question = await client.chat.completions.create(model=model, messages=asked)
    assert question.choices[0].message.content == "which colour?"
    assert (question.model_extra or {})["longhaul"]["status"] == "waiting"
    answered = await client.chat.completions.create(
        model=model,
        messages=[
            *asked,
            assistant("which colour?"),
            user("blue"),
        ],
    )
    assert answered.choices[0].message.content == "blue it is"
    assert (answered.model_extra or {})["trace_id"] == (question.model_extra or {})["trace_id"]


async def test_two_keys_never_share_a_run(keyed_stack: RunningGateway, tmp_path: Path) -> None:
    model = write_script(tmp_path / "iso.yaml", [{"content": "one"}, {"content": "two"}])
    a, b = client_for(keyed_stack, KEY_A), client_for(keyed_stack, KEY_B)
    first: list[ChatCompletionMessageParam] = [user("same words")]
    mine = await a.chat.completions.create(model=model, messages=first)
    conversation = [
        *first,
        assistant("one"),
        user("go"),
    ]
    # B replays A's whole conversation: it gets a run of its own, never A's trace
    theirs = await b.chat.completions.create(model=model, messages=conversation)
    mine_id = (mine.model_extra or {})["trace_id"]
    assert (theirs.model_extra or {})["trace_id"] != mine_id
    async with keyed_stack.client(KEY_B) as http:
        assert (await http.get(f"/api/traces/{mine_id}")).status_code == 404
        listed = (await http.get("/api/traces")).json()["traces"]
    assert mine_id not in [t["trace_id"] for t in listed]


async def test_refusals_use_openai_error_objects(keyed_stack: RunningGateway) -> None:
    with pytest.raises(openai.AuthenticationError) as unauthorised:
        await client_for(keyed_stack, "not-a-key").models.list()
    assert unauthorised.value.code == "unauthorized"
    client = client_for(keyed_stack, KEY_A)
    with pytest.raises(openai.NotFoundError) as missing:
        await client.chat.completions.create(model="longhaul/no-such-preset", messages=[user("x")])
    assert missing.value.code == "model_not_found"
    assert missing.value.type == "not_found_error"
    with pytest.raises(openai.BadRequestError) as invalid:
        await client.chat.completions.create(
            model="longhaul/default",
            messages=[{"role": "robot", "content": "x"}],  # type: ignore[list-item,misc]
        )
    assert invalid.value.type == "invalid_request_error" and invalid.value.param


async def test_a_run_that_outlasts_the_wait_answers_where_to_follow_it(
    nats_config: NatsConfig,
) -> None:
    # no executor: the run never settles, so the wait ends at completion_timeout_s
    config = gateway_config(nats_config, api_keys=KEY_A, completion_timeout_s=0.5)
    async with serve_gateway(config) as gateway:
        client = client_for(gateway, KEY_A)
        late = await client.chat.completions.create(
            model="longhaul/default", messages=[user("a long job")]
        )
        info = (late.model_extra or {})["longhaul"]
        assert info["status"] == "running"
        assert info["viewer"] == f"{gateway.url}/#/traces/{info['trace_id']}"
        assert info["viewer"] in (late.choices[0].message.content or "")
        chunks = await client.chat.completions.create(
            model="longhaul/default", messages=[user("another")], stream=True
        )
        streamed = "".join([c.choices[0].delta.content or "" async for c in chunks])
        assert "still going" in streamed and "/#/traces/" in streamed
