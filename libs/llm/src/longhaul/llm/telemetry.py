"""OpenTelemetry ``chat`` spans of model calls, in the GenAI semantic conventions, children of
whatever span is current (an executor turn, a planner or verifier step).

Only the OpenTelemetry API is used here: without an SDK installed by the service every call is
the API's no-op. Message contents (prompts, system instructions, answers) go on spans only
when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` opts in; counts, models and
the provider always do.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import msgspec
from longhaul.llm.types import Model, ModelRequest, ModelResponse
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

PROVIDER_NAMES: Mapping[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "local": "llama.cpp",
    "scripted": "longhaul.scripted",
}
"""``gen_ai.provider.name`` by model-string prefix (the semconv's names where it has one); an
operator's own provider names pass through."""

_json = msgspec.json.Encoder()


def tracer() -> trace.Tracer:
    """Looked up at each use, so a provider installed after import is seen."""
    return trace.get_tracer("longhaul")


def tracing_off() -> bool:
    """True while no SDK provider is installed: every span would be the API's no-op, so the
    callers skip building one (its attributes cost more than the model call of a fast step)."""
    provider = trace.get_tracer_provider()
    return isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def capture_content(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def split_model(model_string: str) -> tuple[str, str]:
    """``(gen_ai.provider.name, gen_ai.request.model)`` of a model string."""
    prefix, _, name = model_string.partition(":")
    return PROVIDER_NAMES.get(prefix, prefix), name or model_string


NO_SPAN: AbstractContextManager[Span] = nullcontext(trace.INVALID_SPAN)
"""What the span helpers give while tracing is off: one stateless context, nothing built per
call (a model call and a tool call every step)."""


def model_span(request: ModelRequest) -> AbstractContextManager[Span]:
    """The ``chat <model>`` span around one model call (an exception marks it failed). The
    request's ``metadata`` names the trace (``gen_ai.conversation.id``) and the purpose."""
    return NO_SPAN if tracing_off() else _model_span(request)


@contextmanager
def _model_span(request: ModelRequest) -> Iterator[Span]:
    provider, model = split_model(request.model)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    for key, value in (
        ("gen_ai.conversation.id", request.metadata.get("trace_id")),
        ("longhaul.purpose", request.metadata.get("purpose")),
        ("gen_ai.request.temperature", request.temperature),
        ("gen_ai.request.top_p", request.top_p),
        ("gen_ai.request.max_tokens", request.max_tokens),
        ("gen_ai.request.seed", request.seed),
        ("gen_ai.request.stop_sequences", request.stop),
    ):
        if value is not None:
            attributes[key] = value
    with tracer().start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if span.is_recording() and capture_content():
            system = "\n\n".join(p for p in (request.system_stable, request.system_volatile) if p)
            if system:
                span.set_attribute("gen_ai.system_instructions", system)
            span.set_attribute(
                "gen_ai.input.messages", _json.encode(list(request.messages)).decode()
            )
        try:
            yield span
        except BaseException as exc:
            mark_failed(span, exc)
            raise


def mark_failed(span: Span, exc: BaseException) -> None:
    """``error.type`` and an error status naming the exception's type; its text (providers
    and tools echo requests and outputs in errors) only when contents are opted in."""
    if not span.is_recording():
        return
    span.set_attribute("error.type", type(exc).__name__)
    span.set_status(StatusCode.ERROR, type(exc).__name__)
    if capture_content():
        span.record_exception(exc)


def record_response(span: Span, response: ModelResponse) -> None:
    """What the model answered: its model, finish reason, token usage (cache reads included)."""
    if not span.is_recording():
        return
    usage = response.usage
    if response.model:
        span.set_attribute("gen_ai.response.model", response.model)
    if response.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write_tokens)
    if capture_content():
        message = {k: v for k, v in response.to_message().items() if k != "provider_fields"}
        span.set_attribute("gen_ai.output.messages", _json.encode([message]).decode())


async def traced_complete(model: Model, request: ModelRequest) -> ModelResponse:
    """``model.complete(request)`` inside its ``chat`` span."""
    with model_span(request) as span:
        response = await model.complete(request)
        record_response(span, response)
        return response
