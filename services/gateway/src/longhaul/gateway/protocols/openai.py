"""``/v1``: an OpenAI-compatible chat endpoint, so chat UIs and scripts written for the OpenAI
API drive longhaul agents.

A completion is a run of a durable trace, started and continued through the same operations
as ``/api/traces`` (``start_trace``, ``commands.append_to_trace``). Its id comes back in the
``X-Longhaul-Trace-Id`` header and the ``trace_id`` field.

**Continuing a conversation.** OpenAI clients resend the whole conversation each turn. When
this endpoint answers, it records (per API key and trace, in the workspace KV:
``openai/<owner>/<trace>/<hash>``, removed with the trace) the hash of the conversation
*including its answer* → the trace and its head message. A request whose messages before
the last one hash to a recorded conversation continues that trace: the last message answers
the run's question if it waits for one, else it is a new user turn (a rewind to the recorded
head if the trace moved on since, e.g. the user edited a later turn). Anything else — and a
conversation whose trace was deleted — starts a new trace with the whole history.

**Tools and structured output** (``openai_tools``): the client's ``tools`` are the trace's
client tools, a call of one is answered as ``tool_calls`` and the next request's ``tool``
messages are its results (the conversation before them names the trace, as above);
``response_format`` is the trace's ``output_schema``.

**Long runs.** A request waits up to ``gateway.completion_timeout_s``; then the answer says the
run still goes and where to follow it (the viewer link, also in ``longhaul.viewer``).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from longhaul.agent.contract import LiveUpdate
from longhaul.domain import events as ev
from longhaul.domain.settings import TraceSettings
from longhaul.domain.state import TraceState
from longhaul.gateway import access, commands
from longhaul.gateway.auth import CurrentPrincipal, Principal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ApiError
from longhaul.gateway.protocols.openai_tools import (
    Asked,
    asked,
    handed_over,
    structured,
    trailing_results,
    turn_key,
)
from longhaul.gateway.protocols.run_outcome import (
    RunFollower,
    RunOutcome,
    decoded,
    outcome_of,
    text_of,
    viewer_link,
)
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.openai import (
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    CompletionMessage,
    ModelCard,
    ModelList,
    OpenAIError,
    RunInfo,
    ToolCall,
    Usage,
    chunk,
    usage_chunk,
)
from longhaul.gateway.schemas.runs import RunFile
from longhaul.gateway.schemas.traces import ChatMessage, CreateTraceRequest
from longhaul.gateway.sse_schema import data_events
from longhaul.gateway.streams import ClosingStreamingResponse
from longhaul.gateway.usecases.files import decoded_files, put_files
from longhaul.gateway.usecases.start import check_model, message_inputs, start_trace

PREFIX = "/v1"
MODEL_PREFIX = "longhaul/"
TRACE_HEADER = "X-Longhaul-Trace-Id"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}

router = APIRouter(
    prefix=PREFIX,
    tags=["openai"],
    responses={
        status: {"model": OpenAIError, "description": kind.replace("_", " ")}
        for status, kind in _ERROR_TYPES.items()
    },
)


def openai_error(
    status: int, code: str, message: str, details: Any, headers: dict[str, str] | None
) -> JSONResponse:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``. A body
    that does not match the schema is a 400, as OpenAI answers it."""
    if status == 422:
        status = 400
    param = None
    if isinstance(details, list) and details and isinstance(details[0], dict):
        loc = [str(part) for part in details[0].get("loc", []) if part != "body"]
        param = ".".join(loc) or None
        message = f"{message}: {details[0].get('msg', '')} ({param})"
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


# ---------------------------------------------------------------- models


def _card(preset: str) -> ModelCard:
    return ModelCard(id=MODEL_PREFIX + preset)


@router.get("/models", response_model=ModelList, summary="The presets, as OpenAI models")
async def list_models(runtime: CurrentRuntime, principal: CurrentPrincipal) -> ModelList:
    return ModelList(data=[_card(name) for name in runtime.presets.names()])


@router.get("/models/{model:path}", response_model=ModelCard, summary="One preset as a model")
async def get_model(model: str, runtime: CurrentRuntime, principal: CurrentPrincipal) -> ModelCard:
    return _card(_preset(runtime, model))


def _preset(runtime: Runtime, model: str) -> str:
    name = model.removeprefix(MODEL_PREFIX)
    if not model.startswith(MODEL_PREFIX) or name not in runtime.presets:
        raise ApiError(404, "model_not_found", f"no model {model!r}; GET /v1/models lists them")
    return name


def _target(runtime: Runtime, model: str) -> tuple[str | None, str | None]:
    """(preset, model string) a request's ``model`` names."""
    if model.startswith(MODEL_PREFIX):
        return _preset(runtime, model), None
    check_model(runtime, model)
    return None, model


# ---------------------------------------------------------------- conversations


def conversation_digest(owner: str, messages: Sequence[ChatMessage | list[Any]]) -> str:
    """A conversation's name: the key's owner and each message's role and text (and tool
    call ids), hashed (so equal conversations of two keys never meet)."""
    turns = [m if isinstance(m, list) else turn_key(m) for m in messages]
    digest = hashlib.sha256(owner.encode() + b"\0" + msgspec.json.encode(turns)).hexdigest()
    return digest[:48]


class _Recorded(msgspec.Struct):
    trace_id: str
    head_sequence: int


async def _recorded(
    runtime: Runtime, principal: Principal, prior: list[ChatMessage]
) -> _Recorded | None:
    if not any(m.role == "assistant" for m in prior):
        return None
    workspace = runtime.service.workspace
    digest = conversation_digest(principal.owner, prior)
    async with runtime.nats_call():
        keys = await workspace.keys_matching(f"openai/{principal.owner}/*/{digest}")
        # a conversation recorded before the entries were per trace: openai/<owner>/<digest>
        for key in [*keys, f"openai/{principal.owner}/{digest}"]:
            entry = await workspace.get(key)
            if entry is not None:
                return msgspec.json.decode(entry.value, type=_Recorded)
    return None


async def _remember(
    runtime: Runtime,
    principal: Principal,
    messages: list[ChatMessage],
    reply: str,
    state: TraceState,
    calls: list[ToolCall] | None = None,
) -> None:
    answer = ["assistant", reply, [call.id for call in calls]] if calls else ["assistant", reply]
    history: list[ChatMessage | list[Any]] = [*messages, answer]
    value = msgspec.json.encode(_Recorded(state.trace_id, state.head_sequence))
    key = (
        f"openai/{principal.owner}/{state.trace_id}/{conversation_digest(principal.owner, history)}"
    )
    async with runtime.nats_call():
        await runtime.service.workspace.put(key, value)


def _without_files(
    messages: Sequence[ChatMessage],
) -> tuple[list[ChatMessage], list[tuple[str, str, str | None]]]:
    """The messages without their ``file`` content parts (OpenAI's ``{"type": "file",
    "file": {"filename", "file_data"}}``, the data base64 or a ``data:`` URL), and those
    files as (name, base64, media type): they go into the trace's working directory."""
    kept: list[ChatMessage] = []
    files: list[tuple[str, str, str | None]] = []
    for message in messages:
        parts = message.content
        if message.role != "user" or not isinstance(parts, list):
            kept.append(message)
            continue
        rest = []
        for part in parts:
            if part.get("type") != "file":
                rest.append(part)
                continue
            file = part.get("file")
            name, data = (
                (file.get("filename"), file.get("file_data"))
                if isinstance(file, dict)
                else (None, None)
            )
            if not isinstance(name, str) or not isinstance(data, str):
                raise ApiError(
                    422,
                    "invalid_request",
                    "a file part needs file.filename and file.file_data (base64); file_id "
                    "is not supported",
                )
            media: str | None = None
            if data.startswith("data:"):
                header, _, data = data.partition(",")
                media = header[5:].split(";")[0][:100] or None
            files.append((name, data, media))
        kept.append(message.model_copy(update={"content": rest or ""}))
    return kept, files


def _results(
    state: TraceState, moved: bool, results: list[ChatMessage]
) -> list[ev.ClientToolResult]:
    """The ``tool`` messages as results of the calls the trace handed over (409 when it
    no longer waits on them)."""
    if moved or state.status != "waiting" or state.wait_reason != "client_tools":
        raise ApiError(
            409, "conflict", "the run does not wait for these tool results (it moved on)"
        )
    return [
        ev.ClientToolResult(tool_call_id=m.tool_call_id, content=text_of(m.content))
        for m in results
        if m.role == "tool"
    ]


async def _continue(
    runtime: Runtime,
    principal: Principal,
    recorded: _Recorded,
    turn: list[ChatMessage],
    asked: Asked,
) -> int:
    """Append the conversation's next turn to its trace (its files first): the results of
    the calls it handed over, an answer to its question, or a new user turn; returns the
    event's sequence."""
    turn, files = _without_files(turn)
    if files:
        await access.owned_trace(runtime, principal, recorded.trace_id)
        await put_files(runtime, principal, recorded.trace_id, decoded_files(files))
    last = turn[-1]
    inputs = [] if last.role == "tool" else await message_inputs(runtime, principal, [last])

    def build(state: TraceState) -> ev.TraceEvent:
        moved = state.head_sequence != recorded.head_sequence
        config = asked.config(state.config)
        if last.role == "tool":
            return ev.ToolResultsPosted(results=_results(state, moved, turn), config=config)
        waits = state.status == "waiting" and not moved
        if waits and state.wait_reason == "client_tools":
            raise ApiError(
                400,
                "invalid_request",
                "the assistant's tool_calls must be answered by tool messages first (messages)",
            )
        if waits and state.wait_reason == "human" and config is None:
            return ev.HumanReplied(content=text_of(last.content))
        return ev.RunRequested(
            messages=inputs,
            after_sequence=recorded.head_sequence if moved else None,
            config=config,
        )

    _, event = await commands.append_to_trace(runtime, principal, recorded.trace_id, build)
    return event.seq


async def _begin(
    runtime: Runtime, principal: Principal, body: ChatCompletionRequest
) -> tuple[str, int]:
    """(trace id, sequence to follow from) of the run this request starts or continues."""
    preset, model = _target(runtime, body.model)
    settings = asked(body)
    turn = max(trailing_results(body.messages), 1)
    recorded = await _recorded(runtime, principal, body.messages[:-turn])
    if recorded is not None:
        try:
            after = await _continue(runtime, principal, recorded, body.messages[-turn:], settings)
            return recorded.trace_id, after
        except ApiError as exc:
            if exc.status != 404:
                raise
            # its trace was deleted since: the conversation goes on in a new one
    messages, files = _without_files(body.messages)
    decoded_files(files)  # a bad name or content: 422 here, before any model is built
    create = CreateTraceRequest.stating(
        TraceSettings(model=model, preset=preset, temperature=body.temperature),
        messages=messages,
        files=[RunFile(name=n, content=c, media_type=m) for n, c, m in files],
        **settings.creation(),
    )
    state = await start_trace(runtime, principal, create)
    return state.trace_id, state.stream_seq


# ---------------------------------------------------------------- completions


def _reply(outcome: RunOutcome, link: str, timeout_s: float) -> str:
    """What the assistant says for the run's outcome."""
    if outcome.status == "completed":
        return outcome.answer or ""
    if outcome.question is not None:
        return outcome.question
    if outcome.status == "stopped":
        return f"The run stopped ({outcome.error or 'stop requested'}). See {link}"
    if outcome.status == "waiting":
        return f"The run waits for {outcome.wait_reason}: act on it at {link}"
    return (
        f"The run is still going after {timeout_s:g} s (trace {outcome.trace_id}). "
        f"Follow it at {link}; send a new message in this conversation to continue it "
        "once it is done."
    )


PROVIDER_FAILED = 424
RUN_FAILED = 422


def _failure(state: TraceState, link: str) -> tuple[int, dict[str, Any]]:
    """(status, OpenAI error object) of a failed run: 424 when the model provider failed (a
    dependency failed: neither the request's fault nor ours, and no 5xx a client would
    retry into a second run), 422 when the run itself failed (a verification that never
    passed, an answer cut off or filtered, a bad configuration)."""
    provider = state.stop_reason == "model_error"
    status = PROVIDER_FAILED if provider else RUN_FAILED
    error = {
        "message": f"the run failed ({state.error}); trace {state.trace_id}: {link}",
        "type": "provider_error" if provider else "run_failed",
        "param": None,
        "code": state.stop_reason or "run_failed",
        "trace_id": state.trace_id,
    }
    return status, {"error": error}


def _usage(state: TraceState) -> Usage:
    totals = state.totals
    return Usage(
        prompt_tokens=totals.prompt_tokens,
        completion_tokens=totals.completion_tokens,
        total_tokens=totals.prompt_tokens + totals.completion_tokens,
    )


def _data(body: Any) -> bytes:
    return b"data: " + msgspec.json.encode(body) + b"\n\n"


_DONE = b"data: [DONE]\n\n"


@router.post(
    "/chat/completions",
    response_model=ChatCompletion,
    summary="A chat completion: a run of a durable trace (stream: SSE chunks)",
    responses={
        200: {
            # its data is a JSON chunk, or [DONE]
            "content": data_events(
                "a chat.completion.chunk, an error object ({error: …}, ending a failed run), "
                "or [DONE]"
            )
        },
        PROVIDER_FAILED: {"model": OpenAIError, "description": "the model provider failed"},
        RUN_FAILED: {"model": OpenAIError, "description": "the run failed"},
    },
)
async def chat_completions(
    body: ChatCompletionRequest,
    request: Request,
    runtime: CurrentRuntime,
    principal: CurrentPrincipal,
) -> Response:
    trace_id, after = await _begin(runtime, principal, body)
    link = viewer_link(str(request.base_url), trace_id)
    headers = {TRACE_HEADER: trace_id, "Location": f"/api/traces/{trace_id}"}
    completion_id = f"chatcmpl-{trace_id}-{after}"
    follower = RunFollower(runtime)
    if body.stream:
        chunks = _stream(follower, principal, body, trace_id, after, completion_id, link)
        return ClosingStreamingResponse(chunks, media_type="text/event-stream", headers=headers)
    timeout_s = follower.timeout_s
    state = await follower.settled(principal, trace_id, after)
    outcome = outcome_of(state)
    if outcome.status == "failed":
        status, error = _failure(state, link)
        return JSONResponse(error, status_code=status, headers=headers)
    if outcome.wait_reason == "client_tools":
        reply, calls = handed_over(state)
        choice = Choice(
            message=CompletionMessage(content=reply or None, tool_calls=calls),
            finish_reason="tool_calls",
        )
    else:
        reply, calls = _reply(outcome, link, timeout_s), []
        if outcome.status == "completed":
            reply = structured(state, reply)
        choice = Choice(message=CompletionMessage(content=reply))
    await _remember(runtime, principal, body.messages, reply, state, calls)
    completion = ChatCompletion(
        id=completion_id,
        created=int(time.time()),
        model=body.model,
        choices=[choice],
        usage=_usage(state),
        trace_id=trace_id,
        longhaul=RunInfo(
            trace_id=trace_id,
            status=outcome.status,
            wait_reason=outcome.wait_reason,
            viewer=link,
        ),
    )
    return JSONResponse(completion.model_dump(), headers=headers)


ARGUMENT_CHUNK = 512


def _call_deltas(index: int, call: ToolCall) -> list[dict[str, Any]]:
    """One call as OpenAI streams it: id and name first, then the arguments in pieces."""
    head = {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.function.name, "arguments": ""},
    }
    arguments = call.function.arguments
    pieces = [arguments[i : i + ARGUMENT_CHUNK] for i in range(0, len(arguments), ARGUMENT_CHUNK)]
    return [head, *({"index": index, "function": {"arguments": p}} for p in pieces)]


async def _stream(
    follower: RunFollower,
    principal: Principal,
    body: ChatCompletionRequest,
    trace_id: str,
    after: int,
    completion_id: str,
    link: str,
) -> AsyncIterator[bytes]:
    """SSE chunks: the model's text as it is written (live deltas, completed from the stored
    message when deltas were missed), then what the outcome adds (a question, a timeout
    notice), a closing chunk, the usage chunk if asked for, and ``[DONE]``. A failure ends
    the stream with an error event (``data: {"error": …}``, as OpenAI streams one), then
    ``[DONE]``."""
    created = int(time.time())
    sent: list[str] = []

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _data(chunk(completion_id, created, body.model, trace_id, delta, finish))

    def text(piece: str) -> bytes:
        sent.append(piece)
        return frame({"content": piece})

    yield frame({"role": "assistant", "content": ""})
    runtime, timeout_s = follower.runtime, follower.timeout_s
    streamed = ""  # of the assistant message being written
    try:
        items = follower.items(trace_id, after, live=True)
        async with contextlib.aclosing(items):
            async for item in items:
                if item.kind == "live":
                    update = msgspec.json.decode(item.data, type=LiveUpdate)
                    if update.kind == "delta" and update.text:
                        streamed += update.text
                        yield text(update.text)
                    continue
                event = decoded(item)
                if not isinstance(event, ev.MessageAppended) or event.role != "assistant":
                    continue
                whole = text_of(event.content)
                if not event.tool_calls and whole.startswith(streamed) and whole != streamed:
                    yield text(whole[len(streamed) :])
                streamed = ""
        state = await access.owned_trace(runtime, principal, trace_id)
        outcome = outcome_of(state)
        if outcome.status == "failed":  # the status line is sent: the error is an event
            yield _data(_failure(state, link)[1])
            yield _DONE
            return
        calls: list[ToolCall] = []
        if outcome.wait_reason == "client_tools":
            _, calls = handed_over(state)
            for index, call in enumerate(calls):
                for delta in _call_deltas(index, call):
                    yield frame({"tool_calls": [delta]})
        elif outcome.status != "completed":
            notice = _reply(outcome, link, timeout_s)
            yield text(("\n\n" if sent else "") + notice)
        await _remember(runtime, principal, body.messages, "".join(sent), state, calls)
    except (ApiError, ConnectionError) as exc:
        status, code = (exc.status, exc.code) if isinstance(exc, ApiError) else (503, "unavailable")
        refusal = openai_error(status, code, str(exc), None, None)
        yield b"data: " + bytes(refusal.body) + b"\n\n"
        yield _DONE
        return
    yield frame({}, "tool_calls" if calls else "stop")
    if body.stream_options is not None and body.stream_options.include_usage:
        yield _data(usage_chunk(completion_id, created, body.model, trace_id, _usage(state)))
    yield _DONE
