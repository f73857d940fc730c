"""OpenTelemetry in tests: an SDK provider with the in-memory exporter installed for one test
(then uninstalled, so the rest of the suite runs with tracing off as configured), and a tiny
OTLP/HTTP receiver on loopback that decodes what a real exporter sends.

Uninstalling resets the API's set-once global, as OpenTelemetry's own test utilities do
(``opentelemetry.test.globals_test.reset_trace_globals``); longhaul looks its tracers up at
each use, so nothing keeps the uninstalled provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _reset_globals() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@contextlib.contextmanager
def in_memory_tracing() -> Iterator[InMemorySpanExporter]:
    """Every span finished meanwhile lands in the yielded exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_globals()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        _reset_globals()


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


# ------------------------------------------------------------------ OTLP/HTTP receiver


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class ReceivedSpan:
    """One span as it came over the wire."""

    def __init__(self, service: str, span: Any) -> None:
        self.service = service
        self.name: str = span.name
        self.trace_id: str = span.trace_id.hex()
        self.span_id: str = span.span_id.hex()
        self.parent_span_id: str = span.parent_span_id.hex()
        self.attributes: dict[str, Any] = {a.key: _value(a.value) for a in span.attributes}


class OtlpReceiver:
    """``POST /v1/traces`` on a loopback port, decoded with opentelemetry-proto; ``changed``
    is set (on the test's loop) after each request."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.content_types: set[str] = set()
        self.changed = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                spans: list[ReceivedSpan] = []
                for resource_spans in request.resource_spans:
                    service = next(
                        (
                            _value(a.value)
                            for a in resource_spans.resource.attributes
                            if a.key == "service.name"
                        ),
                        "",
                    )
                    for scope_spans in resource_spans.scope_spans:
                        spans.extend(ReceivedSpan(service, s) for s in scope_spans.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
                receiver._loop.call_soon_threadsafe(
                    receiver._received, spans, self.headers.get("Content-Type", "")
                )

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _received(self, spans: list[ReceivedSpan], content_type: str) -> None:
        self.requests += 1
        self.content_types.add(content_type)
        self.spans.extend(spans)
        self.changed.set()

    async def wait_for(
        self, name_prefix: str, *, within: float, service: str | None = None
    ) -> ReceivedSpan:
        """The first span received whose name starts with ``name_prefix`` (from ``service``)."""
        async with asyncio.timeout(within):
            while True:
                for span in self.spans:
                    if span.name.startswith(name_prefix) and service in (None, span.service):
                        return span
                self.changed.clear()
                await self.changed.wait()

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
