"""Fake model APIs on real loopback HTTP servers, for tests and benchmarks.

Each fake speaks its API's wire format (status codes, error bodies, SSE framing and event
shapes), validates requests the way the real API does (unpaired tool calls, id formats,
Anthropic grouping and ``cache_control``, Gemini function-response pairing and thought
signatures) and answers from a script::

    async with FakeOpenAI(script=[Reply(tool_calls=[Call("search", {"q": "x"})]),
                                  Reply(text="done")]) as server:
        config = server.models_config()          # ModelsConfig pointing at the fake
        ...                                       # or server.base_url / server.api_key
        assert server.requests[0].json["model"] == "gpt-4o"

A script step is a :class:`Reply`, a :class:`Fail` (an HTTP error such as a 429 with
``Retry-After``), a :class:`Break` (output then a mid-stream failure), or a callable that
receives the :class:`RecordedRequest` and returns one of those. A request that fails
validation is answered 400 and consumes no step. When the script is exhausted the fake
answers with ``default`` if given, else a 400 naming the problem. :class:`RecordSteps` is a
``default`` that answers from the request's conversation (many traces, one fake). Setting
``outage`` takes the provider down: every request gets that answer until it is cleared.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self
from urllib.parse import parse_qs, urlsplit

from longhaul.domain.config import ModelsConfig, ProviderConfig
from pydantic import SecretStr


@dataclass
class Call:
    """A tool call the fake model makes; ``arguments`` as text sends it verbatim."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """One successful model turn, streamed in ``chunk``-character fragments."""

    text: str = ""
    tool_calls: Sequence[Call] = ()
    chunk: int = 4
    usage: bool = True
    prompt_tokens: int = 100
    completion_tokens: int = 20
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reuse_index_zero: bool = False
    """OpenAI: send every tool call on index 0, distinguished only by a new id."""
    thinking: str | None = None
    """Anthropic: a thinking block (with a signature) before the text."""
    thought_signature: str | None = None
    """Gemini: attached to each functionCall part (or the last text part)."""
    interval_s: float = 0.0
    """Pause before each streamed event, to pace output like a model generating tokens."""
    finish: str | None = None
    """The wire's own ending instead of the natural one (OpenAI ``finish_reason``, Anthropic
    ``stop_reason``, Gemini ``finishReason``), e.g. ``length`` / ``max_tokens`` / ``MAX_TOKENS``."""


@dataclass
class Fail:
    """An HTTP error answer, in the API's error shape."""

    status: int
    message: str = "fake failure"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Break:
    """Stream ``text``, then fail: ``drop`` the connection or send the API's error event."""

    text: str = "partial output"
    mode: Literal["drop", "error_event"] = "drop"


@dataclass
class Hold:
    """Stream ``text``, then hold the stream open until the client goes away: a model that
    does not finish until it is cut off (OpenAI only). ``streaming`` is set once the text is
    out, ``client_gone`` once the client closed the connection (proof it cancelled the call)."""

    text: str = "let me think about this at length"
    streaming: asyncio.Event = field(default_factory=asyncio.Event)
    client_gone: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    received_at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


Step = Reply | Fail | Break | Hold | Callable[[RecordedRequest], "Reply | Fail | Break"]


class _Rejected(Exception):
    """A request the real API would refuse; carries the status and error body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(json.dumps(body))
        self.status = status
        self.body = body


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(size, 1))]


def _stable_suffix(*seed: object, length: int = 24) -> str:
    return hashlib.sha256(json.dumps(seed, default=str).encode()).hexdigest()[:length]


class _Response:
    """Minimal HTTP/1.1 response writer: JSON bodies, chunked SSE streams, abrupt aborts."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_last_byte: Callable[[float], None],
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_last_byte = on_last_byte
        self.aborted = False
        self.interval_s = 0.0
        self._last_payload_at = 0.0

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        head = {
            "content-type": "application/json",
            "content-length": str(len(payload)),
            **(headers or {}),
        }
        stamp = time.perf_counter()
        self._writer.write(self._head(status, head) + payload)
        await self._writer.drain()
        self._on_last_byte(stamp)

    async def start_stream(self) -> None:
        head = {
            "content-type": "text/event-stream",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
        }
        self._writer.write(self._head(200, head))

    async def send(self, text: str) -> None:
        if self.interval_s:
            await asyncio.sleep(self.interval_s)
        self._last_payload_at = time.perf_counter()
        data = text.encode()
        self._writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await self._writer.drain()

    async def event(self, data: Any, event: str | None = None) -> None:
        prefix = f"event: {event}\n" if event else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        await self.send(f"{prefix}data: {payload}\n\n")

    async def end(self) -> None:
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()
        self._on_last_byte(self._last_payload_at)

    def abort(self) -> None:
        self.aborted = True
        self._writer.transport.abort()

    async def until_client_gone(self) -> None:
        """Send nothing more; return once the client closed the connection (HTTP/1.1: it
        sends nothing else while a response streams)."""
        with contextlib.suppress(ConnectionError):
            while await self._reader.read(1024):
                pass
        self.aborted = True


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}


class FakeServer:
    """Shared machinery; subclasses implement one API."""

    provider = ""
    base_path = ""

    def __init__(
        self,
        script: Sequence[Step] = (),
        *,
        default: Step | None = None,
        api_key: str = "test-key",
    ) -> None:
        self.script: list[Step] = list(script)
        self.default = default
        self.api_key = api_key
        self.requests: list[RecordedRequest] = []
        self.last_byte_at: list[float] = []
        """Per response, ``time.perf_counter()`` just before its body (JSON) or its last
        event (streams, before the chunked terminator) was written; appended after the
        write drained."""
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.connections = 0
        """TCP connections accepted: a client that reuses its connection keeps this at 1."""
        self.rejected: list[RecordedRequest] = []
        """Requests refused the way the real API would (unpaired tool calls, bad shape…)."""
        self.outage: Fail | None = None
        """While set, the provider is down: every request gets this answer, before any
        validation or script step (``outage_requests`` counts them)."""
        self.outage_requests = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def models_config(self, name: str | None = None, **settings: Any) -> ModelsConfig:
        """A ModelsConfig whose provider ``name`` (default: this API's) points at the fake;
        ``settings`` go to its ProviderConfig (tiny retry delays by default)."""
        provider = name or self.provider
        settings.setdefault("retry_base_delay_s", 0.001)
        settings.setdefault("retry_max_delay_s", 0.01)
        if name and name != self.provider:
            settings.setdefault("kind", self.provider)
        config = ProviderConfig(base_url=self.base_url, api_key=SecretStr(self.api_key), **settings)
        return ModelsConfig(default=f"{provider}:fake-model", providers={provider: config})

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                response = _Response(reader, writer, self.last_byte_at.append)
                await self._respond(request, response)
                if response.aborted:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
        line = await reader.readline()
        if not line.strip():
            return None
        method, target, _ = line.decode().split(" ", 2)
        headers: dict[str, str] = {}
        while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = header.decode().partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        url = urlsplit(target)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        return RecordedRequest(method, url.path, query, headers, body, time.perf_counter())

    async def _respond(self, request: RecordedRequest, out: _Response) -> None:
        if self.outage is not None:
            self.outage_requests += 1
            down = self.outage
            await out.json(down.status, self.error_body(down.status, down.message), down.headers)
            return
        try:
            self.validate(request)
        except _Rejected as rejected:
            self.rejected.append(request)
            await out.json(rejected.status, rejected.body)
            return
        step = self.script.pop(0) if self.script else self.default
        if step is None:
            await out.json(400, self.error_body(400, "fake: script exhausted"))
            return
        if callable(step):
            step = step(request)
        if isinstance(step, Fail):
            await out.json(step.status, self.error_body(step.status, step.message), step.headers)
        elif isinstance(step, Hold):
            await out.start_stream()
            await self.stream_text(step.text, request, out)
            step.streaming.set()
            await out.until_client_gone()
            step.client_gone.set()
        elif self.is_streaming(request):
            await out.start_stream()
            out.interval_s = step.interval_s if isinstance(step, Reply) else 0.0
            if isinstance(step, Break):
                await self.stream_break(step, request, out)
            else:
                await self.stream_reply(step, request, out)
                await out.end()
        elif isinstance(step, Break):
            out.abort()
        else:
            await out.json(200, self.full_reply(step, request))

    # -- per API -------------------------------------------------------------------------

    def validate(self, request: RecordedRequest) -> None:
        """Raise :class:`_Rejected` as the real API would."""

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def is_streaming(self, request: RecordedRequest) -> bool:
        raise NotImplementedError

    async def stream_reply(self, reply: Reply, request: RecordedRequest, out: _Response) -> None:
        raise NotImplementedError

    async def stream_break(self, step: Break, request: RecordedRequest, out: _Response) -> None:
        raise NotImplementedError

    async def stream_text(self, text: str, request: RecordedRequest, out: _Response) -> None:
        """Text deltas of an answer that goes on (no ending)."""
        raise NotImplementedError

    def full_reply(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        raise NotImplementedError


# -- OpenAI ------------------------------------------------------------------------------

_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


class FakeOpenAI(FakeServer):
    """``POST /v1/chat/completions`` of OpenAI (and of vLLM, Ollama … which copy it)."""

    provider = "openai"
    base_path = "/v1"

    def error_body(
        self, status: int, message: str, param: str | None = None, code: str | None = None
    ) -> dict[str, Any]:
        return {
            "error": {
                "message": message,
                "type": _OPENAI_ERROR_TYPES.get(status, "error"),
                "param": param,
                "code": code,
            }
        }

    def _reject(
        self, message: str, param: str | None = None, code: str | None = None, status: int = 400
    ) -> _Rejected:
        return _Rejected(status, self.error_body(status, message, param, code))

    def validate(self, request: RecordedRequest) -> None:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            raise self._reject("Incorrect API key provided.", code="invalid_api_key", status=401)
        if request.path != "/v1/chat/completions":
            raise self._reject(f"Invalid URL (POST {request.path})", status=404)
        body = request.json
        if not body.get("model"):
            raise self._reject("you must provide a model parameter", param="model")
        messages = body.get("messages") or []
        if not messages:
            raise self._reject("[] is too short - 'messages'", param="messages")
        expected: list[str] = []
        for position, message in enumerate(messages):
            role = message.get("role")
            if role == "tool":
                if message.get("tool_call_id") not in expected:
                    raise self._reject(
                        "Invalid parameter: messages with role 'tool' must be a response to a "
                        "preceeding message with 'tool_calls'.",
                        param=f"messages.[{position}].role",
                    )
                expected.remove(message["tool_call_id"])
                continue
            if expected:
                raise self._unanswered(expected)
            for n, call in enumerate(
                message.get("tool_calls") or () if role == "assistant" else ()
            ):
                if len(call["id"]) > 40:
                    raise self._reject(
                        f"Invalid 'messages[{position}].tool_calls[{n}].id': string too long. "
                        "Expected a string with maximum length 40, but got a string with "
                        f"length {len(call['id'])} instead.",
                        param=f"messages[{position}].tool_calls[{n}].id",
                        code="string_above_max_length",
                    )
                expected.append(call["id"])
        if expected:
            raise self._unanswered(expected)

    def _unanswered(self, ids: list[str]) -> _Rejected:
        return self._reject(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(ids)}",
            param="messages",
        )

    def is_streaming(self, request: RecordedRequest) -> bool:
        return bool(request.json.get("stream"))

    def _ids(self, reply: Reply) -> list[str]:
        return [
            call.id or f"call_{_stable_suffix(len(self.requests), n)}"
            for n, call in enumerate(reply.tool_calls)
        ]

    def _usage(self, reply: Reply) -> dict[str, Any]:
        return {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }

    async def stream_reply(self, reply: Reply, request: RecordedRequest, out: _Response) -> None:
        body = request.json
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {
            "id": f"chatcmpl-{_stable_suffix(len(self.requests))}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": body["model"],
            "system_fingerprint": "fp_fake",
        }

        async def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
            data = {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if with_usage:
                data["usage"] = None
            await out.event(data)

        await chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in _pieces(reply.text, reply.chunk):
            await chunk({"content": piece})
        for n, (call, call_id) in enumerate(zip(reply.tool_calls, self._ids(reply), strict=True)):
            index = 0 if reply.reuse_index_zero else n
            await chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
            for piece in _pieces(call.arguments_text, reply.chunk):
                await chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        await chunk({}, reply.finish or ("tool_calls" if reply.tool_calls else "stop"))
        if with_usage and reply.usage:
            await out.event({**base, "choices": [], "usage": self._usage(reply)})
        await out.event("[DONE]")

    async def stream_text(self, text: str, request: RecordedRequest, out: _Response) -> None:
        base = {
            "id": "chatcmpl-break",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": request.json["model"],
        }
        for piece in _pieces(text, 4):
            await out.event(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
            )

    async def stream_break(self, step: Break, request: RecordedRequest, out: _Response) -> None:
        await self.stream_text(step.text, request, out)
        if step.mode == "drop":
            out.abort()
            return
        await out.event(
            self.error_body(
                500, "The server had an error while processing your request. Sorry about that!"
            )
        )
        await out.end()

    def full_reply(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_text},
                }
                for call, call_id in zip(reply.tool_calls, self._ids(reply), strict=True)
            ]
        return {
            "id": f"chatcmpl-{_stable_suffix(len(self.requests))}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.json["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish or ("tool_calls" if reply.tool_calls else "stop"),
                }
            ],
            "usage": self._usage(reply),
        }


# -- Anthropic ---------------------------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ANTHROPIC_ID = "^[a-zA-Z0-9_-]+$"


_ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


class FakeAnthropic(FakeServer):
    """``POST /v1/messages``. With ``require_cached_system`` it also insists that the first
    system block, and only it, carries ``cache_control`` (what PromptCache promises)."""

    provider = "anthropic"

    def __init__(
        self, script: Sequence[Step] = (), *, require_cached_system: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(script, **kwargs)
        self.require_cached_system = require_cached_system

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
        }

    def _reject(self, message: str, status: int = 400) -> _Rejected:
        return _Rejected(status, self.error_body(status, message))

    def validate(self, request: RecordedRequest) -> None:
        if request.headers.get("x-api-key") != self.api_key:
            raise self._reject("invalid x-api-key", status=401)
        if not request.headers.get("anthropic-version"):
            raise self._reject("anthropic-version: header is required")
        if request.path != "/v1/messages":
            raise self._reject(f"Not found: {request.path}", status=404)
        body = request.json
        if "max_tokens" not in body:
            raise self._reject("max_tokens: Field required")
        system = body.get("system") or []
        cached = [block for block in system if "cache_control" in block]
        cached += [
            block
            for message in body.get("messages", [])
            for block in message["content"]
            if isinstance(block, dict) and "cache_control" in block
        ]
        if len(cached) > 4:
            raise self._reject(
                f"A maximum of 4 blocks with cache_control may be provided. Found {len(cached)}."
            )
        for n, block in enumerate(system):
            if not block.get("text"):
                raise self._reject(f"system.{n}: text content blocks must be non-empty")
        if self.require_cached_system:
            marks = [block.get("cache_control") for block in system]
            if not marks or marks[0] != {"type": "ephemeral"} or any(marks[1:]):
                raise self._reject(
                    "fake: expected cache_control {'type': 'ephemeral'} on the "
                    f"first (stable) system block only, got {marks}"
                )
        self._validate_messages(body.get("messages") or [])

    def _validate_image(self, block: dict[str, Any], where: str) -> None:
        """Image blocks: base64 with a supported media type, or a URL."""
        source = block.get("source") or {}
        if source.get("type") == "url" and str(source.get("url", "")).startswith("http"):
            return
        if source.get("type") != "base64":
            raise self._reject(f"{where}.image.source: Input tag does not match 'base64', 'url'")
        if source.get("media_type") not in _ANTHROPIC_IMAGE_TYPES:
            raise self._reject(
                f"{where}.image.source.base64.media_type: Input should be 'image/jpeg', "
                "'image/png', 'image/gif' or 'image/webp'"
            )
        try:
            base64.b64decode(source.get("data", ""), validate=True)
        except ValueError:
            raise self._reject(f"{where}.image.source.base64: invalid base64 data") from None

    def _validate_messages(self, messages: list[dict[str, Any]]) -> None:
        if messages and messages[0]["role"] != "user":
            raise self._reject('messages: first message must use the "user" role')
        for position, message in enumerate(messages):
            if position and message["role"] == messages[position - 1]["role"]:
                raise self._reject(
                    'messages: roles must alternate between "user" and "assistant", but found '
                    f'multiple "{message["role"]}" roles in a row'
                )
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not blocks:
                raise self._reject(
                    f"messages.{position}: all messages must have non-empty "
                    "content except for the optional final assistant message"
                )
            for n, block in enumerate(blocks):
                if block["type"] == "text" and not block.get("text"):
                    raise self._reject(
                        f"messages.{position}.content.{n}: text content blocks must be non-empty"
                    )
                if block["type"] == "image":
                    self._validate_image(block, f"messages.{position}.content.{n}")
                if block["type"] == "tool_use" and not _matches(block.get("id", "")):
                    raise self._reject(
                        f"messages.{position}.content.{n}.tool_use.id: String "
                        f"should match pattern '{_ANTHROPIC_ID}'"
                    )
            uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
            following = messages[position + 1]["content"] if position + 1 < len(messages) else []
            leading: list[str] = []
            for block in following if isinstance(following, list) else []:
                if block["type"] != "tool_result":
                    break
                leading.append(block["tool_use_id"])
            missing = [call_id for call_id in uses if call_id not in leading]
            if missing:
                raise self._reject(
                    f"messages.{position + 1}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(missing)}. Each `tool_use` block "
                    "must have a corresponding `tool_result` block in the next message."
                )
            unexpected = [call_id for call_id in leading if call_id not in uses]
            if unexpected:
                raise self._reject(
                    f"messages.{position + 1}.content.0: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {unexpected[0]}. Each `tool_result` block must "
                    "have a corresponding `tool_use` block in the previous message."
                )

    def is_streaming(self, request: RecordedRequest) -> bool:
        return bool(request.json.get("stream"))

    def _blocks(self, reply: Reply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.thinking is not None:
            blocks.append(
                {
                    "type": "thinking",
                    "thinking": reply.thinking,
                    "signature": f"sig-{_stable_suffix(reply.thinking)}",
                }
            )
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        blocks += [
            {
                "type": "tool_use",
                "id": call.id or f"toolu_01{_stable_suffix(len(self.requests), n, length=22)}",
                "name": call.name,
                "input": call.arguments,
            }
            for n, call in enumerate(reply.tool_calls)
        ]
        return blocks

    def _usage(self, reply: Reply, output_tokens: int) -> dict[str, Any]:
        fresh = reply.prompt_tokens - reply.cached_tokens - reply.cache_write_tokens
        return {
            "input_tokens": fresh,
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "cache_read_input_tokens": reply.cached_tokens,
            "output_tokens": output_tokens,
        }

    def _message(
        self, reply: Reply, request: RecordedRequest, content: list[dict[str, Any]]
    ) -> dict[str, Any]:
        message = {
            "id": f"msg_01{_stable_suffix(len(self.requests), length=22)}",
            "type": "message",
            "role": "assistant",
            "model": request.json["model"],
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
        }
        if reply.usage:
            message["usage"] = self._usage(reply, 1)
        return message

    async def stream_reply(self, reply: Reply, request: RecordedRequest, out: _Response) -> None:
        await out.event(
            {"type": "message_start", "message": self._message(reply, request, [])}, "message_start"
        )
        await out.event({"type": "ping"}, "ping")
        empty: dict[str, dict[str, Any]] = {
            "thinking": {"thinking": "", "signature": ""},
            "text": {"text": ""},
            "tool_use": {"input": {}},
        }
        for index, block in enumerate(self._blocks(reply)):
            start = {**block, **empty[block["type"]]}
            await out.event(
                {"type": "content_block_start", "index": index, "content_block": start},
                "content_block_start",
            )
            deltas: list[dict[str, Any]]
            if block["type"] == "thinking":
                deltas = [
                    {"type": "thinking_delta", "thinking": piece}
                    for piece in _pieces(block["thinking"], reply.chunk)
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "text":
                deltas = [
                    {"type": "text_delta", "text": piece}
                    for piece in _pieces(block["text"], reply.chunk)
                ]
            else:
                arguments = (
                    json.dumps(block["input"])
                    if isinstance(block["input"], dict)
                    else block["input"]
                )
                deltas = [
                    {"type": "input_json_delta", "partial_json": piece}
                    for piece in ["", *_pieces(arguments, reply.chunk)]
                ]
            for piece in deltas:
                await out.event(
                    {"type": "content_block_delta", "index": index, "delta": piece},
                    "content_block_delta",
                )
            await out.event({"type": "content_block_stop", "index": index}, "content_block_stop")
        stop = reply.finish or ("tool_use" if reply.tool_calls else "end_turn")
        ending: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
        }
        if reply.usage:
            ending["usage"] = {"output_tokens": reply.completion_tokens}
        await out.event(ending, "message_delta")
        await out.event({"type": "message_stop"}, "message_stop")

    async def stream_break(self, step: Break, request: RecordedRequest, out: _Response) -> None:
        await out.event(
            {"type": "message_start", "message": self._message(Reply(), request, [])},
            "message_start",
        )
        await out.event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        )
        for piece in _pieces(step.text, 4):
            await out.event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
                "content_block_delta",
            )
        if step.mode == "drop":
            out.abort()
            return
        await out.event(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        )
        await out.end()

    def full_reply(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        message = self._message(reply, request, self._blocks(reply))
        message["stop_reason"] = reply.finish or ("tool_use" if reply.tool_calls else "end_turn")
        if reply.usage:
            message["usage"] = self._usage(reply, reply.completion_tokens)
        return message


def _matches(call_id: str) -> bool:
    return bool(call_id) and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in call_id)


# -- Gemini ------------------------------------------------------------------------------

_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class FakeGemini(FakeServer):
    """``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` and ``:generateContent``.
    Remembers the thought signatures it issued and rejects a replayed function call that
    lost its signature, as Gemini 3 does."""

    provider = "gemini"
    base_path = "/v1beta"

    def __init__(self, script: Sequence[Step] = (), **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self.issued_signatures: dict[str, str] = {}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {
            "error": {
                "code": status,
                "message": message,
                "status": _GEMINI_STATUS.get(status, "UNKNOWN"),
            }
        }

    def _reject(self, message: str, status: int = 400) -> _Rejected:
        return _Rejected(status, self.error_body(status, message))

    def validate(self, request: RecordedRequest) -> None:
        if request.headers.get("x-goog-api-key") != self.api_key:
            raise self._reject("API key not valid. Please pass a valid API key.")
        action = request.path.rpartition(":")[2]
        if not request.path.startswith("/v1beta/models/") or action not in (
            "streamGenerateContent",
            "generateContent",
        ):
            raise self._reject(f"Method not found: {request.path}", status=404)
        contents = request.json.get("contents") or []
        if not contents:
            raise self._reject("* GenerateContentRequest.contents: contents is not specified")
        calls: list[str] = []
        for position, content in enumerate(contents):
            parts = content.get("parts") or []
            if not parts:
                raise self._reject(
                    f"* GenerateContentRequest.contents[{position}].parts: "
                    "contents.parts must not be empty."
                )
            for n, part in enumerate(parts):
                where = f"* GenerateContentRequest.contents[{position}].parts[{n}]"
                inline = part.get("inlineData")
                if inline is not None:
                    if not inline.get("mimeType"):
                        raise self._reject(f"{where}.inline_data.mime_type: required")
                    try:
                        base64.b64decode(inline.get("data", ""), validate=True)
                    except ValueError:
                        raise self._reject(f"{where}.inline_data.data: invalid base64") from None
                if "fileData" in part and not part["fileData"].get("fileUri"):
                    raise self._reject(f"{where}.file_data.file_uri: required")
            responses = [p["functionResponse"]["name"] for p in parts if "functionResponse" in p]
            if calls or responses:
                if len(responses) != len(calls):
                    raise self._reject(
                        "Please ensure that the number of function response parts is equal to "
                        "the number of function call parts of the function call turn."
                    )
                if responses != calls:
                    raise self._reject(
                        "Please ensure that function response parts are in the "
                        f"order of the function calls: {calls} != {responses}"
                    )
            calls = []
            if content.get("role") == "model":
                for n, part in enumerate(parts):
                    if "functionCall" not in part:
                        continue
                    call = part["functionCall"]
                    calls.append(call["name"])
                    issued = self.issued_signatures.get(_call_key(call))
                    if issued is not None and part.get("thoughtSignature") != issued:
                        raise self._reject(
                            "Function call is missing a thought_signature in functionCall "
                            "parts. This is required for tools to work correctly, and missing "
                            "thought_signature may lead to degraded model performance. "
                            f"Additional data, function call `default_api:{call['name']}` , "
                            f"position {n + 1}. Please refer to https://ai.google.dev/gemini-"
                            "api/docs/thought-signatures for more details."
                        )
        if calls:
            raise self._reject(
                "Please ensure that the number of function response parts is "
                "equal to the number of function call parts of the function "
                "call turn."
            )

    def is_streaming(self, request: RecordedRequest) -> bool:
        return request.path.endswith(":streamGenerateContent") and request.query.get("alt") == "sse"

    def _model(self, request: RecordedRequest) -> str:
        return request.path.removeprefix("/v1beta/models/").rpartition(":")[0]

    def _usage(self, reply: Reply) -> dict[str, Any]:
        usage = {
            "promptTokenCount": reply.prompt_tokens,
            "candidatesTokenCount": reply.completion_tokens,
            "totalTokenCount": reply.prompt_tokens + reply.completion_tokens,
        }
        if reply.cached_tokens:
            usage["cachedContentTokenCount"] = reply.cached_tokens
        return usage

    def _call_parts(self, reply: Reply) -> list[dict[str, Any]]:
        parts = []
        for call in reply.tool_calls:
            part: dict[str, Any] = {"functionCall": {"name": call.name, "args": call.arguments}}
            if reply.thought_signature:
                part["thoughtSignature"] = reply.thought_signature
                self.issued_signatures[_call_key(part["functionCall"])] = reply.thought_signature
            parts.append(part)
        return parts

    def _chunk(
        self,
        reply: Reply,
        request: RecordedRequest,
        parts: list[dict[str, Any]],
        finish: str | None = None,
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        chunk: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": self._model(request),
            "responseId": _stable_suffix(len(self.requests)),
        }
        if reply.usage:
            chunk["usageMetadata"] = self._usage(reply)
        return chunk

    async def stream_reply(self, reply: Reply, request: RecordedRequest, out: _Response) -> None:
        pieces = _pieces(reply.text, reply.chunk)
        for n, piece in enumerate(pieces):
            part: dict[str, Any] = {"text": piece}
            if n == len(pieces) - 1 and reply.thought_signature and not reply.tool_calls:
                part["thoughtSignature"] = reply.thought_signature
            await out.event(self._chunk(reply, request, [part]))
        if reply.tool_calls:
            await out.event(self._chunk(reply, request, self._call_parts(reply)))
        await out.event(self._chunk(reply, request, [{"text": ""}], reply.finish or "STOP"))

    async def stream_break(self, step: Break, request: RecordedRequest, out: _Response) -> None:
        for piece in _pieces(step.text, 4):
            await out.event(self._chunk(Reply(usage=False), request, [{"text": piece}]))
        if step.mode == "drop":
            out.abort()
            return
        await out.event(
            self.error_body(
                500,
                "An internal error has occurred. Please retry or "
                "report in https://developers.generativeai.google/"
                "guide/troubleshooting",
            )
        )
        await out.end()

    def full_reply(self, reply: Reply, request: RecordedRequest) -> dict[str, Any]:
        parts = ([{"text": reply.text}] if reply.text else []) + self._call_parts(reply)
        return self._chunk(reply, request, parts, reply.finish or "STOP")


def _call_key(call: dict[str, Any]) -> str:
    return json.dumps([call.get("name"), call.get("args")], sort_keys=True)


# -- A model that answers from the conversation ---------------------------------------------

STEPS_MARK = "record-steps:"


def steps_prompt(text: str, *, steps: int, log: str, hold_ms: int = 0) -> str:
    """A user message asking :class:`RecordSteps` for ``steps`` calls of ``record``."""
    plan = json.dumps({"steps": steps, "log": log, "hold_ms": hold_ms})
    return f"{text}\n{STEPS_MARK} {plan}"


@dataclass
class RecordSteps:
    """A script step (use it as ``default=``) that decides from the conversation, not from its
    position in a script: the first user message holds ``record-steps: {"steps": N, "log":
    …, "hold_ms": …}`` (:func:`steps_prompt`); with K assistant messages in the request it
    calls ``record`` for step K, and answers once K reaches N. So many traces share one fake,
    and a conversation begun on one fake goes on on another (OpenAI and Anthropic formats)."""

    answer: str = "all steps done"

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json.get("messages") or []
        first: dict[str, Any] = next((m for m in messages if m.get("role") == "user"), {})
        plan_text = _text_of(first.get("content")).partition(STEPS_MARK)[2].strip()
        plan = json.loads(plan_text.splitlines()[0]) if plan_text else {"steps": 0}
        step = sum(1 for m in messages if m.get("role") == "assistant")
        if step >= plan["steps"]:
            return Reply(text=self.answer)
        arguments = {"step": step, "log": plan["log"], "hold_ms": plan.get("hold_ms", 0)}
        return Reply(tool_calls=[Call("record", arguments)])


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text blocks of a list (OpenAI and Anthropic)."""
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content or () if isinstance(block, dict))


__all__ = [
    "Break",
    "Call",
    "Fail",
    "FakeAnthropic",
    "FakeGemini",
    "FakeOpenAI",
    "FakeServer",
    "RecordSteps",
    "RecordedRequest",
    "Reply",
    "Step",
    "steps_prompt",
]
