"""OpenTelemetry ``execute_tool`` spans of the engine, in the GenAI semantic conventions: one
per tool call, a child of the executor's ``invoke_agent`` turn span (model calls get their
``chat`` spans from ``longhaul.llm.telemetry``).

Only the OpenTelemetry API is used here: without an SDK installed by the service every call is
the API's no-op. Tool arguments and results go on spans only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` opts in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from longhaul.agent.tools.result import Deferred, ToolReply
from longhaul.llm.telemetry import NO_SPAN, capture_content, mark_failed, tracer, tracing_off
from longhaul.llm.types import ToolCall
from opentelemetry.trace import Span, SpanKind, StatusCode


def tool_span(trace_id: str, call: ToolCall) -> AbstractContextManager[Span]:
    """The ``execute_tool <name>`` span around one tool call, its recording included."""
    return NO_SPAN if tracing_off() else _tool_span(trace_id, call)


@contextmanager
def _tool_span(trace_id: str, call: ToolCall) -> Iterator[Span]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": trace_id,
    }
    with tracer().start_as_current_span(
        f"execute_tool {call.name}",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if span.is_recording() and capture_content():
            span.set_attribute("gen_ai.tool.call.arguments", call.arguments)
        try:
            yield span
        except BaseException as exc:
            mark_failed(span, exc)
            raise


def record_reply(span: Span, reply: ToolReply) -> None:
    """How the call ended: deferred (its result comes in a later turn), failed, or answered."""
    if not span.is_recording():
        return
    if isinstance(reply, Deferred):
        span.set_attribute("longhaul.tool.deferred", reply.reason)
        return
    if reply.error_code:
        span.set_attribute("error.type", reply.error_code)
        span.set_status(StatusCode.ERROR, reply.error_code)
    if capture_content():
        span.set_attribute("gen_ai.tool.call.result", reply.output)
