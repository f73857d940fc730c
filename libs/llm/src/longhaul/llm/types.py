"""The one model interface every provider implements.

Messages are OpenAI chat-format dicts inside longhaul; providers convert to and from their own
wire format. A provider exposes ``complete`` (one response) and ``stream`` (an async iterator of
:class:`StreamEvent` ending with exactly one :class:`StreamEnd`). ``complete`` is defined in
terms of ``stream`` by :func:`collect`, so a provider only has to write one of them well.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec
from longhaul.domain.messages import ToolCall, Usage

ChatMessage = dict[str, Any]
"""One OpenAI-format message: ``{"role", "content", "tool_calls"?, "tool_call_id"?, "name"?}``."""


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered to the model: name, description and JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


JSON_OBJECT: dict[str, Any] = {"type": "object"}
"""A ``response_schema`` that asks for any JSON object (OpenAI ``json_object``)."""


class ModelRequest(msgspec.Struct, kw_only=True):
    """Everything one model call needs.

    ``system`` is split into a ``stable`` part (cacheable prefix) and a ``volatile`` part (time,
    memory) by the PromptCache middleware; providers decide how to send them.

    ``messages`` is only read: the agent engine passes a read-only view of the trace's history
    (any sequence will do); code that wants other messages assigns a new sequence.
    """

    model: str
    messages: Sequence[ChatMessage]
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    system_stable: str = ""
    system_volatile: str = ""
    cache_system: bool = True
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] | None = None
    tool_choice: str | dict[str, str] | None = None
    """``auto``, ``required``, ``none``, or ``{"name": tool}``: the model must call that one."""
    parallel_tool_calls: bool | None = None
    """False: at most one tool call per response, where the provider has the switch."""
    response_schema: dict[str, Any] | None = None
    """The answer is JSON matching it (:data:`JSON_OBJECT`: any object, JSON mode)."""
    schema_name: str = "response"
    schema_strict: bool = False
    """The provider is asked to enforce ``response_schema`` exactly (OpenAI ``strict``,
    Anthropic ``output_config.format``): the schema then keeps to their common subset."""
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class ModelResponse(msgspec.Struct, kw_only=True):
    """One finished assistant turn."""

    content: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    usage: Usage = msgspec.field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""
    provider_fields: dict[str, Any] = msgspec.field(default_factory=dict)
    """Provider-specific data kept with the message and replayed (signatures, thinking)."""

    def to_message(self) -> ChatMessage:
        """The assistant message to store; ``provider_fields`` ride along so that the provider
        which produced them (and only it) gets them back on the next call."""
        message: ChatMessage = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.provider_fields:
            message["provider_fields"] = self.provider_fields
        return message


class TextDelta(msgspec.Struct, frozen=True):
    text: str


class ToolCallDelta(msgspec.Struct, frozen=True, kw_only=True):
    """A fragment of a tool call; fragments with the same ``index`` join into one call."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class RetryNotice(msgspec.Struct, frozen=True, kw_only=True):
    """The provider is waiting before a retry; surfaced on the live stream."""

    attempt: int
    delay_s: float
    reason: str
    outage: str | None = None
    """Why the failed attempt was the provider's fault (``longhaul.llm.fallback``), or
    ``None`` for a rate limit it asks to wait out: what a circuit breaker counts."""


class StreamEnd(msgspec.Struct, frozen=True):
    response: ModelResponse


StreamEvent = TextDelta | ToolCallDelta | RetryNotice | StreamEnd

Role = Literal["system", "user", "assistant", "tool"]


class ModelError(Exception):
    """A model call failed for good. ``retryable`` says whether a later attempt may succeed;
    ``outage`` names a failure of the provider rather than of the request (``connect``,
    ``timeout``, ``server_error``, ``rate_limited``, ``quota``): another model may answer
    (``longhaul.llm.fallback``)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        partial_output: bool = False,
        outage: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.partial_output = partial_output
        self.outage = outage


@runtime_checkable
class Model(Protocol):
    """What the engine talks to. ``name`` is the full model string, e.g. ``openai:gpt-4o``."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


async def collect(
    events: AsyncIterator[StreamEvent],
    on_event: Callable[[StreamEvent], Awaitable[None] | None] | None = None,
) -> ModelResponse:
    """Drain a stream and return its final response, forwarding every event to ``on_event``."""
    final: ModelResponse | None = None
    async for event in events:
        if on_event is not None:
            result = on_event(event)
            if result is not None:
                await result
        if isinstance(event, StreamEnd):
            final = event.response
    if final is None:
        raise ModelError("model stream ended without a final response")
    return final
