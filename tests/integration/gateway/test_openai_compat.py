"""``/v1`` driven by OpenAI's own Python client against a real gateway and executor on a
scripted model: models, a completion, a streamed follow-up that continues the same trace, a
question answered by the next message, two API keys that never see each other's runs,
refusals in OpenAI's error shape, a failed run as an error (422, or 424 when the provider
failed; an error event in a stream), ``developer`` messages and the usage chunk."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from longhaul.core.config import NatsConfig
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
from tests.support.llm_fakes import Fail, FakeOpenAI
from tests.support.stack import InProcessExecutor, test_config


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


async def test_a_failed_run_is_an_error_not_an_answer(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    # the provider answered, but its filter ended the answer: the run failed (422)
    filtered = write_script(
        tmp_path / "filtered.yaml", [{"content": "I can't", "finish_reason": "content_filter"}]
    )
    client = client_for(keyed_stack, KEY_A)
    with pytest.raises(openai.UnprocessableEntityError) as failed:
        await client.chat.completions.create(model=filtered, messages=[user("x")])
    assert failed.value.status_code == 422 and failed.value.code == "content_filter"
    assert failed.value.type == "run_failed"
    body = failed.value.body
    assert isinstance(body, dict)
    trace_id = failed.value.response.headers["x-longhaul-trace-id"]
    assert body["trace_id"] == trace_id and trace_id in failed.value.message
    async with keyed_stack.client(KEY_A) as http:
        assert (await http.get(f"/api/traces/{trace_id}")).json()["status"] == "failed"


@pytest.fixture
async def failing_provider(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[RunningGateway]:
    """A gateway whose executor's model provider (OpenAI's wire, on loopback) answers 500."""
    config = gateway_config(nats_config, api_keys=KEY_A)
    async with (
        FakeOpenAI(default=Fail(500, "the provider is down")) as provider,
        serve_gateway(config) as gateway,
        InProcessExecutor(
            nats_url,
            namespace,
            "exec-failing",
            config=test_config(nats_url, namespace, models=provider.models_config()),
            settings={"working_root": tmp_path},
        ),
    ):
        yield gateway


async def test_a_provider_failure_is_a_424_and_ends_a_stream_with_an_error_event(
    failing_provider: RunningGateway,
) -> None:
    client = client_for(failing_provider, KEY_A)
    with pytest.raises(openai.APIStatusError) as failed:
        await client.chat.completions.create(model="longhaul/default", messages=[user("x")])
    assert failed.value.status_code == 424
    assert failed.value.code == "model_error" and failed.value.type == "provider_error"
    assert "the provider is down" in failed.value.message

    chunks = await client.chat.completions.create(
        model="longhaul/default", messages=[user("again")], stream=True
    )
    with pytest.raises(openai.APIError) as streamed:
        async for _ in chunks:
            pass
    assert streamed.value.code == "model_error"
    assert isinstance(streamed.value.body, dict) and streamed.value.body["trace_id"]
    # on the wire: the error event, then [DONE], as OpenAI ends a stream that failed
    async with failing_provider.client(KEY_A) as http:
        raw = await http.post(
            "/v1/chat/completions",
            json={"model": "longhaul/default", "messages": [user("once more")], "stream": True},
        )
    frames = [line[6:] for line in raw.text.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    assert json.loads(frames[-2])["error"]["code"] == "model_error"


async def test_a_developer_message_is_read_as_system(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    model = write_script(tmp_path / "dev.yaml", [{"content": "understood"}])
    client = client_for(keyed_stack, KEY_A)
    raw = await client.chat.completions.with_raw_response.create(
        model=model,
        messages=[{"role": "developer", "content": "answer in French"}, user("hello")],
    )
    assert raw.parse().choices[0].message.content == "understood"
    trace_id = raw.headers["x-longhaul-trace-id"]
    async with keyed_stack.client(KEY_A) as http:
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert {"role": "system", "content": "answer in French"}.items() <= path[0].items()


async def test_include_usage_ends_the_stream_with_the_usage_chunk(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    usage = {"prompt_tokens": 11, "completion_tokens": 4}
    model = write_script(tmp_path / "usage.yaml", [{"content": "counted", "usage": usage}])
    client = client_for(keyed_stack, KEY_A)
    chunks = await client.chat.completions.create(
        model=model,
        messages=[user("count")],
        stream=True,
        stream_options={"include_usage": True},
    )
    got = [c async for c in chunks]
    last = got[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (11, 4)
    assert last.usage.total_tokens == 15
    assert all(c.usage is None for c in got[:-1])
    assert "".join(c.choices[0].delta.content or "" for c in got[:-1]) == "counted"


def file_part(name: str, text: str) -> Any:
    data = base64.b64encode(text.encode()).decode()
    return {
        "type": "file",
        "file": {"filename": name, "file_data": f"data:text/plain;base64,{data}"},
    }


async def test_file_parts_reach_the_working_directory_before_the_model_reads(
    keyed_stack: RunningGateway, tmp_path: Path
) -> None:
    """OpenAI ``file`` content parts: a new conversation's are in the trace's directory
    before its first model call, a follow-up's before the next one."""
    model = write_script(
        tmp_path / "files.yaml",
        [
            {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
            {"content": "read the notes"},
            {"tool_calls": [{"name": "read", "arguments": {"path": "more.txt"}}]},
            {"content": "read more"},
        ],
    )
    client = client_for(keyed_stack, KEY_A)
    first: Any = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "read my notes"}, file_part("notes.txt", "n-1")],
        }
    ]
    raw = await client.chat.completions.with_raw_response.create(model=model, messages=first)
    assert raw.parse().choices[0].message.content == "read the notes"
    trace_id = raw.headers["x-longhaul-trace-id"]
    follow_up: Any = [
        *first,
        assistant("read the notes"),
        {"role": "user", "content": [file_part("more.txt", "m-2")]},
    ]
    raw = await client.chat.completions.with_raw_response.create(model=model, messages=follow_up)
    assert raw.headers["x-longhaul-trace-id"] == trace_id
    assert raw.parse().choices[0].message.content == "read more"
    async with keyed_stack.client(KEY_A) as http:
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        bad = await http.post(
            "/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": [file_part("../x", "")]}],
            },
        )
    reads = [str(m["content"]) for m in path if m["role"] == "tool"]
    assert "n-1" in reads[0] and "m-2" in reads[1], reads
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_file_name"
