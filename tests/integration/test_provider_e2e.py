"""A trace through the executor service and the real HTTP provider fakes.

See docs/08-engine.md and docs/04-models-and-tools.md.

The fakes speak the OpenAI / Anthropic / Gemini wire formats and answer 400 exactly like the
real APIs when tool calls are unpaired, Anthropic's tool results are not grouped, (with
``require_cached_system``) the stable system block is not the one carrying ``cache_control``,
or a Gemini function call comes back without its thought signature or its response.
Each test checks the fake refused nothing: the executor pipeline must never trigger a 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
from longhaul.agent.contract import LiveUpdate
from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.config import ModelPrice, ModelsConfig
from longhaul.domain.ids import new_id
from longhaul.domain.state import Message, TraceState
from nats.aio.msg import Msg

from tests.support.llm_fakes import (
    Call,
    Fail,
    FakeAnthropic,
    FakeGemini,
    FakeOpenAI,
    RecordedRequest,
    Reply,
    Step,
)
from tests.support.stack import InProcessExecutor, create_trace, test_config, wait_for_trace

WITHIN_S = 20.0
PRICE = ModelPrice(input=1.0, output=2.0)
"""Dollars per million tokens for ``fake-model``: 100 prompt + 20 completion tokens (the
fakes' default usage) cost (100 * 1 + 20 * 2) / 1e6."""
STEP_COST = (100 * PRICE.input + 20 * PRICE.output) / 1_000_000


def priced(config: ModelsConfig) -> ModelsConfig:
    return config.model_copy(update={"prices": {"fake-model": PRICE}})


@contextlib.asynccontextmanager
async def executor_on(
    nats_url: str, namespace: str, models: ModelsConfig, working_root: Path
) -> AsyncIterator[InProcessExecutor]:
    config = test_config(nats_url, namespace, models=priced(models))
    async with InProcessExecutor(
        nats_url, namespace, config=config, settings={"working_root": working_root}
    ) as executor:
        yield executor


def home(working_root: Path, trace_id: str) -> Path:
    """Where a trace with no owner (these are written to the log directly) works."""
    return working_root / "unowned" / trace_id


def main_path(state: TraceState) -> list[Message]:
    return state.main_path()


def tool_calls_of(message: Message) -> list[tuple[str, str, str]]:
    return [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()]


def refused(requests: list[RecordedRequest]) -> list[Any]:
    return [request.json for request in requests]


async def test_openai_tool_call_streamed_in_fragments_runs_and_the_answer_comes_back(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    content = 'line one of the notes\nline two, with "quotes" and a tab\t.\n'
    arguments = {"path": "notes/out.txt", "content": content}
    answer = "I wrote notes/out.txt for you."
    script = [
        Reply(text="Writing the file.", tool_calls=[Call("write", arguments)], chunk=3),
        Reply(text=answer, chunk=5),
    ]
    assert len(json.dumps(arguments)) // 3 > 20  # the arguments arrive as many SSE fragments
    async with (
        FakeOpenAI(script=script) as fake,
        executor_on(nats_url, namespace, fake.models_config(), tmp_path),
    ):
        trace_id = await create_trace(store, "write the notes", model="openai:fake-model")
        state = await wait_for_trace(store, trace_id, within=WITHIN_S)

    assert state.status == "completed", state.error
    # the tool really ran, in the trace's working directory
    assert (home(tmp_path, trace_id) / "notes" / "out.txt").read_text() == content

    path = main_path(state)
    assert [m.role for m in path] == ["user", "assistant", "tool", "assistant"]
    _, call_message, result, final = path
    [(call_id, name, raw_arguments)] = tool_calls_of(call_message)
    assert name == "write" and json.loads(raw_arguments) == arguments  # fragments reassembled
    assert result.tool_call_id == call_id and result.name == "write"
    assert result.content == f"wrote {len(content.encode())} bytes to notes/out.txt"
    assert result.error_code is None and not result.synthetic

    # the answer came back: the completed summary is the last main-path message
    assert final.content == answer and not final.tool_calls
    assert state.summary == answer
    # how each answer ended is recorded, as the provider said it (OpenAI's own names)
    assert (call_message.finish_reason, final.finish_reason) == ("tool_calls", "stop")

    # usage and cost recorded on the assistant messages, and summed into the totals
    for message in (call_message, final):
        assert message.usage is not None
        assert (message.usage.prompt_tokens, message.usage.completion_tokens) == (100, 20)
        assert message.cost == STEP_COST
        assert message.model == "openai:fake-model"
    assert state.totals.prompt_tokens == 200 and state.totals.completion_tokens == 40
    assert abs(state.totals.cost - 2 * STEP_COST) < 1e-12

    # the fake refused nothing and got the tool result paired with the call id
    assert fake.rejected == [], refused(fake.rejected)
    assert len(fake.requests) == 2
    first, second = (request.json for request in fake.requests)
    assert "write" in {tool["function"]["name"] for tool in first["tools"]}
    wire = second["messages"]
    [at] = [n for n, m in enumerate(wire) if m["role"] == "assistant"]
    assert [c["id"] for c in wire[at]["tool_calls"]] == [call_id]
    assert json.loads(wire[at]["tool_calls"][0]["function"]["arguments"]) == arguments
    assert wire[at + 1]["role"] == "tool" and wire[at + 1]["tool_call_id"] == call_id
    assert wire[at + 1]["content"] == result.content
    # after the result only the volatile context note (time, memory), never cached
    assert at + 3 == len(wire) and wire[-1]["content"].startswith("<context>")


async def test_anthropic_two_parallel_tool_calls_run_and_their_results_are_grouped(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    answer = "alpha printed, beta written."
    calls = [
        Call("bash", {"command": "echo alpha-$((40 + 2))"}),
        Call("write", {"path": "beta.txt", "content": "beta\n"}),
    ]
    script = [
        Reply(text="Two things at once.", tool_calls=calls, chunk=4),
        Reply(text=answer, chunk=6),
    ]
    async with (
        FakeAnthropic(script=script, require_cached_system=True) as fake,
        executor_on(nats_url, namespace, fake.models_config(), tmp_path),
    ):
        trace_id = await create_trace(store, "do both", model="anthropic:fake-model")
        state = await wait_for_trace(store, trace_id, within=WITHIN_S)

    assert state.status == "completed", state.error
    assert (home(tmp_path, trace_id) / "beta.txt").read_text() == "beta\n"
    path = main_path(state)
    assert [m.role for m in path] == ["user", "assistant", "tool", "tool", "assistant"]
    call_message, bash_result, write_result, final = path[1:]
    made = tool_calls_of(call_message)
    assert [name for _, name, _ in made] == ["bash", "write"]
    [bash_id, write_id] = [call_id for call_id, _, _ in made]
    assert (bash_result.tool_call_id, write_result.tool_call_id) == (bash_id, write_id)
    assert bash_result.content == "alpha-42\n\n[exit code 0]"
    assert write_result.content == "wrote 5 bytes to beta.txt"
    assert final.content == answer and state.summary == answer
    assert call_message.usage is not None and call_message.cost == STEP_COST

    # cache_control on the stable system block only and grouped results: nothing refused
    assert fake.rejected == [], refused(fake.rejected)
    assert len(fake.requests) == 2
    second = fake.requests[1].json
    assert second["system"][0]["cache_control"] == {"type": "ephemeral"}
    wire = second["messages"]
    [at] = [n for n, m in enumerate(wire) if m["role"] == "assistant"]
    uses = [b["id"] for b in wire[at]["content"] if b["type"] == "tool_use"]
    assert uses == [bash_id, write_id]
    grouped = wire[at + 1]
    assert grouped["role"] == "user" and at + 2 == len(wire)  # one user turn holds both
    results = {b["tool_use_id"]: b for b in grouped["content"] if b["type"] == "tool_result"}
    assert list(results) == [bash_id, write_id]
    assert "alpha-42" in json.dumps(results[bash_id]["content"])
    assert "wrote 5 bytes" in json.dumps(results[write_id]["content"])


async def test_a_429_with_retry_after_is_retried_and_announced_on_the_live_subject(
    nats_url: str, namespace: str, conn: Connection, store: EventStore, tmp_path: Path
) -> None:
    retry_after_s = 1.0
    answer = "made it after the rate limit"
    script: list[Step] = [
        Fail(429, "Rate limit reached for requests", {"retry-after": f"{retry_after_s:g}"}),
        Reply(text=answer),
    ]
    trace_id = new_id("t")
    updates: asyncio.Queue[LiveUpdate] = asyncio.Queue()

    async def on_live(msg: Msg) -> None:
        updates.put_nowait(msgspec.json.decode(msg.data, type=LiveUpdate))

    sub = await conn.nc.subscribe(conn.names.live(trace_id), cb=on_live)
    await conn.nc.flush()  # the subscription is registered before anything can publish
    try:
        async with (
            FakeOpenAI(script=script) as fake,
            executor_on(nats_url, namespace, fake.models_config(), tmp_path),
        ):
            await create_trace(store, "say something", trace_id=trace_id, model="openai:fake-model")
            state = await wait_for_trace(store, trace_id, within=WITHIN_S)
            async with asyncio.timeout(5):
                while (update := await updates.get()).kind != "retry":
                    pass
    finally:
        await sub.unsubscribe()

    assert state.status == "completed", state.error
    assert state.summary == answer and main_path(state)[-1].content == answer
    assert "rate limited (429)" in update.text and "attempt 1" in update.text
    assert f"in {retry_after_s:.1f}s" in update.text  # the server's wait, not the backoff
    assert fake.rejected == [], refused(fake.rejected)
    assert len(fake.requests) == 2
    # the retry waited as long as Retry-After asked (configured backoff is ~1 ms)
    gap = fake.requests[1].received_at - fake.requests[0].received_at
    assert gap >= retry_after_s
    assert fake.requests[1].json["messages"] == fake.requests[0].json["messages"]


async def test_an_answer_cut_at_the_length_limit_is_continued_and_completes_whole(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    parts = ["The plan has three steps: first, ", "read the notes; second, ", "write it up."]
    script = [
        Reply(text=parts[0], finish="length"),
        Reply(text=parts[1], finish="length"),
        Reply(text=parts[2]),
    ]
    async with (
        FakeOpenAI(script=script) as fake,
        executor_on(nats_url, namespace, fake.models_config(), tmp_path),
    ):
        trace_id = await create_trace(store, "plan it", model="openai:fake-model")
        state = await wait_for_trace(store, trace_id, within=WITHIN_S)

    # never taken as the final answer: asked to continue twice (the default), then whole
    assert state.status == "completed", state.error
    assert state.summary == "".join(parts)
    path = main_path(state)
    assert [(m.role, m.finish_reason) for m in path] == [
        ("user", None),
        ("assistant", "length"),
        ("user", None),
        ("assistant", "length"),
        ("user", None),
        ("assistant", "stop"),
    ]
    prompts = path[2], path[4]
    assert all(
        p.synthetic and "cut off at the output length limit" in str(p.content) for p in prompts
    )
    # the model saw its cut part followed by the request to continue
    assert fake.rejected == [], refused(fake.rejected)
    wire = fake.requests[1].json["messages"]
    assert wire[-1]["content"].startswith("<context>")  # the volatile note comes last
    assert (wire[-3]["role"], wire[-3]["content"]) == ("assistant", parts[0])
    assert wire[-2]["role"] == "user" and "Continue exactly" in str(wire[-2]["content"])


async def test_an_answer_still_cut_after_the_continuations_fails_truncated(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    script = [Reply(text=f"part {n} ", finish="max_tokens") for n in range(4)]
    async with (
        FakeAnthropic(script=script) as fake,
        executor_on(nats_url, namespace, fake.models_config(), tmp_path),
    ):
        trace_id = await create_trace(store, "write a saga", model="anthropic:fake-model")
        state = await wait_for_trace(store, trace_id, within=WITHIN_S)

    # Anthropic's max_tokens is recorded as length; 1 answer + 2 continuations, then failed
    assert state.status == "failed" and state.stop_reason == "truncated", state.error
    assert state.summary is None or "part" not in state.summary
    cut = [m for m in main_path(state) if m.role == "assistant"]
    assert [m.finish_reason for m in cut] == ["length"] * 3
    assert len(fake.requests) == 3 and fake.rejected == [], refused(fake.rejected)


async def test_a_tool_call_cut_mid_arguments_is_answered_with_an_error_never_run(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    cut = Call("write", '{"path": "out.txt", "content": "the first half of the fi')
    script = [Reply(tool_calls=[cut], finish="length"), Reply(text="I will write less.")]
    async with (
        FakeOpenAI(script=script) as fake,
        executor_on(nats_url, namespace, fake.models_config(), tmp_path),
    ):
        trace_id = await create_trace(store, "write out.txt", model="openai:fake-model")
        state = await wait_for_trace(store, trace_id, within=WITHIN_S)

    assert state.status == "completed", state.error
    assert not (home(tmp_path, trace_id) / "out.txt").exists()  # never executed
    _, call_message, result, _ = main_path(state)
    assert call_message.finish_reason == "length"
    assert result.error_code == "truncated" and result.synthetic
    assert "cut off at the output length limit" in str(result.content)
    assert fake.rejected == [], refused(fake.rejected)


async def test_a_refusal_ends_the_run_visibly(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    script = [Reply(text="I can't help with that.", finish="refusal")]
    async with (
        FakeAnthropic(script=script) as fake,
        executor_on(nats_url, namespace, fake.models_config(), tmp_path),
    ):
        trace_id = await create_trace(store, "do the thing", model="anthropic:fake-model")
        state = await wait_for_trace(store, trace_id, within=WITHIN_S)

    assert state.status == "failed" and state.stop_reason == "content_filter", state.status
    assert "content filter" in (state.error or "")
    [answer] = [m for m in main_path(state) if m.role == "assistant"]
    assert answer.finish_reason == "content_filter" and len(fake.requests) == 1


PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
"""A 1x1 PNG."""


async def test_gemini_streams_an_image_question_a_signed_tool_call_and_the_answer(
    nats_url: str, namespace: str, conn: Connection, store: EventStore, tmp_path: Path
) -> None:
    answer = "The picture is one pixel; I noted it in pixel.txt."
    arguments = {"path": "pixel.txt", "content": "one pixel\n"}
    script = [
        Reply(
            text="Noting it down.",
            tool_calls=[Call("write", arguments)],
            thought_signature="sig-write-1",
            chunk=3,
            cached_tokens=40,
        ),
        Reply(text=answer, chunk=5),
    ]
    question = ev.InputMessage(
        role="user",
        content=[
            {"type": "text", "text": "what is in this picture? note it in pixel.txt"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
        ],
    )
    trace_id = new_id("t")
    deltas: list[str] = []

    async def on_live(msg: Msg) -> None:
        update = msgspec.json.decode(msg.data, type=LiveUpdate)
        if update.kind == "delta":
            deltas.append(update.text)

    sub = await conn.nc.subscribe(conn.names.live(trace_id), cb=on_live)
    await conn.nc.flush()
    try:
        async with (
            FakeGemini(script=script) as fake,
            executor_on(nats_url, namespace, fake.models_config(), tmp_path),
        ):
            await create_trace(store, [question], trace_id=trace_id, model="gemini:fake-model")
            state = await wait_for_trace(store, trace_id, within=WITHIN_S)
    finally:
        await sub.unsubscribe()

    assert state.status == "completed", state.error
    assert (
        home(tmp_path, trace_id) / "pixel.txt"
    ).read_text() == "one pixel\n"  # the tool really ran
    _, call_message, result, final = main_path(state)
    [(call_id, name, raw_arguments)] = tool_calls_of(call_message)
    assert name == "write" and json.loads(raw_arguments) == arguments
    assert result.tool_call_id == call_id and result.content == "wrote 10 bytes to pixel.txt"
    assert final.content == answer and state.summary == answer
    assert (call_message.finish_reason, final.finish_reason) == ("tool_calls", "stop")
    # streamed: every request asked for SSE, and the text reached watchers as deltas
    assert all(
        r.path == "/v1beta/models/fake-model:streamGenerateContent" and r.query == {"alt": "sse"}
        for r in fake.requests
    )
    assert "".join(deltas).endswith(answer) and len(deltas) > 1
    # usage (with Gemini's cached prompt tokens) and cost, per message and in the totals
    assert call_message.usage is not None and final.usage is not None
    assert (call_message.usage.prompt_tokens, call_message.usage.completion_tokens) == (100, 20)
    assert call_message.usage.cache_read_tokens == 40
    assert final.cost == STEP_COST and final.model == "gemini:fake-model"
    assert state.totals.prompt_tokens == 200 and state.totals.completion_tokens == 40

    # nothing refused: the signature came back on the call, the response paired by name
    assert fake.rejected == [], refused(fake.rejected)
    assert len(fake.requests) == 2
    first, second = (request.json for request in fake.requests)
    declared = {f["name"] for tool in first["tools"] for f in tool["functionDeclarations"]}
    assert "write" in declared
    [image] = [p["inlineData"] for p in first["contents"][0]["parts"] if "inlineData" in p]
    assert image == {"mimeType": "image/png", "data": PIXEL}
    [model_turn] = [c for c in second["contents"] if c["role"] == "model"]
    [call_part] = [p for p in model_turn["parts"] if "functionCall" in p]
    assert call_part["thoughtSignature"] == "sig-write-1"
    assert call_part["functionCall"] == {"name": "write", "args": arguments}
    responses = [
        p["functionResponse"]
        for c in second["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert [r["name"] for r in responses] == ["write"]
    assert "wrote 10 bytes" in json.dumps(responses[0]["response"])
