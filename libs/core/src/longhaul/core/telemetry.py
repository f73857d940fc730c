"""OpenTelemetry for the services: an export pipeline only when the operator asks for one, and
the W3C trace context carried from service to service on the events themselves.

Off unless configured. :func:`setup_tracing` installs the SDK (a batch processor feeding the
OTLP/HTTP exporter, both configured by the standard ``OTEL_*`` variables) only when an OTLP
endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``…_TRACES_ENDPOINT``) and neither
``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none`` says otherwise. Without it the
API's no-op tracer answers every span call and :func:`current_carrier` finds no valid span, so
no event carries a context and nothing is exported.

Where the context lives. Events are durable and a turn may be resumed by another executor
after a crash, so the context cannot live in a process: :func:`stamp` records the writer's
current span on every event it appends (the envelope's ``trace_context``, a W3C carrier:
``traceparent``, ``tracestate``) and the event store sends the same carrier as the NATS message
headers, where JetStream keeps it with the message. Consumers woken by a delivered message
(planner, verifier) continue from its headers; the trace fold remembers the carrier of the event
that started the current run (``TraceState.run_trace_context``) and of each ``subtrace_spawned``
(``SubtraceInfo.trace_context``), so every turn of a run, on any executor and after any
takeover, is a child of the request that started the run, and a child trace's run of the
parent's tool span.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

log = logging.getLogger(__name__)

TRACER_NAME = "longhaul"

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def export_configured(env: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables ask for OTLP export of traces."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() in ("none", ""):
        return False
    return any(env.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def setup_tracing(service: str) -> TracerProvider | None:
    """Install the SDK with OTLP/HTTP export when configured (else do nothing and return None).
    The caller shuts the provider down on exit, which flushes the spans still batched."""
    if not export_configured():
        return None
    # Imported here: a process with tracing off never loads the exporter (or protobuf).
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    resource = Resource.create()  # OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: f"longhaul-{service}"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    log.info("OpenTelemetry: exporting spans of %s over OTLP/HTTP", resource.attributes)
    return provider


@contextmanager
def tracing(service: str) -> Iterator[None]:
    """:func:`setup_tracing` for a process's lifetime; on the way out the provider is shut
    down, which exports the spans still batched."""
    provider = setup_tracing(service)
    try:
        yield
    finally:
        if provider is not None:
            provider.shutdown()


def tracing_enabled() -> bool:
    """Whether an SDK tracer provider is installed (by :func:`setup_tracing` or a test)."""
    return isinstance(trace.get_tracer_provider(), TracerProvider)


def tracer() -> trace.Tracer:
    """The services' tracer, looked up at each use so a provider installed later is seen."""
    return trace.get_tracer(TRACER_NAME)


def current_carrier() -> dict[str, str] | None:
    """The current span as a W3C carrier (``traceparent``…), or None when there is none."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def context_of(carrier: Mapping[str, str] | None) -> Context | None:
    """The context a carrier (event field or NATS headers) names; None for none."""
    if not carrier or "traceparent" not in carrier:
        return None
    return propagate.extract(carrier)


def carrier_headers(carrier: Mapping[str, str] | None) -> dict[str, str]:
    """A carrier as NATS headers: never one of JetStream's own ``Nats-*`` headers."""
    if not carrier:
        return {}
    return {key: value for key, value in carrier.items() if not key.lower().startswith("nats-")}
