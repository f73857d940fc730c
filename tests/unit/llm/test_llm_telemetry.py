"""``chat`` spans of model calls (GenAI semantic conventions) against a real-wire fake API:
provider, models, token usage with cache reads and writes as the provider reported them, a
failed call marked failed, contents only when opted in."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from longhaul.agent.telemetry import tool_span
from longhaul.llm import ModelError, ModelRegistry, ModelRequest
from longhaul.llm.structured import complete_json
from longhaul.llm.telemetry import CAPTURE_CONTENT_VARIABLE, NO_SPAN, model_span, traced_complete
from longhaul.llm.types import ToolCall
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN, SpanKind, StatusCode

from tests.support.llm_fakes import Fail, FakeAnthropic, FakeOpenAI, Reply
from tests.support.otel import in_memory_tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with in_memory_tracing() as exporter:
        yield exporter


def request(model: str) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=[{"role": "user", "content": "SECRET-QUESTION"}],
        system_stable="be brief",
        temperature=0.2,
        metadata={"trace_id": "t_1", "purpose": "judge"},
    )


async def test_an_anthropic_call_s_span_carries_provider_models_and_cache_usage(
    spans: InMemorySpanExporter, registry: ModelRegistry
) -> None:
    reply = Reply(
        text="ANSWER",
        prompt_tokens=1000,
        cached_tokens=800,
        cache_write_tokens=150,
        completion_tokens=9,
    )
    async with FakeAnthropic([reply]) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config())
        response = await traced_complete(model, request(model.name))
    [span] = spans.get_finished_spans()
    a = dict(span.attributes or {})
    assert span.name == "chat claude-sonnet-4-5" and span.kind is SpanKind.CLIENT
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert a["gen_ai.request.model"] == "claude-sonnet-4-5"
    assert a["gen_ai.response.model"] == response.model and response.model
    assert a["gen_ai.request.temperature"] == 0.2
    assert a["gen_ai.conversation.id"] == "t_1" and a["longhaul.purpose"] == "judge"
    assert a["gen_ai.usage.input_tokens"] == response.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == 9
    assert a["gen_ai.usage.cache_read.input_tokens"] == 800
    assert a["gen_ai.usage.cache_creation.input_tokens"] == 150
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert not any(key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system")) for key in a)
    assert "SECRET" not in repr(a) and "ANSWER" not in repr(a)


async def test_a_failed_call_s_span_is_an_error_and_structured_calls_are_traced(
    spans: InMemorySpanExporter, registry: ModelRegistry
) -> None:
    verdict = Reply(text=json.dumps({"passed": True}))
    async with FakeOpenAI([Fail(400, "bad request"), verdict]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        with pytest.raises(ModelError):
            await traced_complete(model, request(model.name))
        value, _ = await complete_json(
            model, [{"role": "user", "content": "judge"}], {"type": "object"}
        )
    assert value == {"passed": True}
    failed, judged = spans.get_finished_spans()
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "ModelError"
    assert dict(judged.attributes or {})["gen_ai.provider.name"] == "openai"
    assert dict(judged.attributes or {})["gen_ai.usage.input_tokens"] == 100


async def test_contents_go_on_the_span_only_when_opted_in(
    spans: InMemorySpanExporter, registry: ModelRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
    async with FakeOpenAI([Reply(text="ANSWER")]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        await traced_complete(model, request(model.name))
    [span] = spans.get_finished_spans()
    a = dict(span.attributes or {})
    assert json.loads(str(a["gen_ai.input.messages"])) == [
        {"role": "user", "content": "SECRET-QUESTION"}
    ]
    assert a["gen_ai.system_instructions"] == "be brief"
    assert json.loads(str(a["gen_ai.output.messages"])) == [
        {"role": "assistant", "content": "ANSWER"}
    ]


async def test_a_failed_call_s_error_text_stays_off_the_span_unless_opted_in(
    spans: InMemorySpanExporter, registry: ModelRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Providers echo parts of the request in their errors: the text is content.
    echo = Fail(400, "bad content: SECRET-QUESTION")
    async with FakeOpenAI([echo, echo]) as server:
        model = registry.resolve("openai:gpt-4o", server.models_config())
        with pytest.raises(ModelError, match="SECRET-QUESTION"):
            await traced_complete(model, request(model.name))
        monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
        with pytest.raises(ModelError):
            await traced_complete(model, request(model.name))
    hidden, shown = spans.get_finished_spans()
    assert hidden.status.status_code is StatusCode.ERROR
    assert hidden.status.description == "ModelError"
    assert dict(hidden.attributes or {})["error.type"] == "ModelError"
    assert "SECRET" not in hidden.to_json() and not hidden.events
    [event] = shown.events
    assert "SECRET-QUESTION" in str(dict(event.attributes or {})["exception.message"])


def test_with_tracing_off_the_span_helpers_build_nothing_and_pass_errors_through() -> None:
    """Every step makes a model call and a tool call: with no SDK installed both get one
    shared no-op context (reentrant: nested, it is the same), and an error goes through."""
    call = ToolCall.of(id="c1", name="noop", arguments="{}")
    assert model_span(request("scripted:x")) is NO_SPAN and tool_span("t_1", call) is NO_SPAN
    with pytest.raises(ValueError, match="boom"):
        with model_span(request("scripted:x")) as outer, tool_span("t_1", call) as inner:
            assert outer is inner is INVALID_SPAN
            raise ValueError("boom")


def test_tracing_installed_later_gets_real_spans(spans: InMemorySpanExporter) -> None:
    call = ToolCall.of(id="c1", name="noop", arguments="{}")
    with pytest.raises(ValueError), tool_span("t_1", call) as span:
        assert span.is_recording()
        raise ValueError("boom")
    [finished] = spans.get_finished_spans()
    assert finished.name == "execute_tool noop" and finished.status.status_code is StatusCode.ERROR
