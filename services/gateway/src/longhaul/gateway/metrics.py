"""Prometheus metrics of the gateway, in a registry of its own (one per app instance).

Request counters and latencies come from an ASGI middleware; trace counts, tokens and cost are
read from the index mirror at scrape time; consumer lag is asked of JetStream at scrape time;
LLM retries are counted from the ``retry`` live updates executors publish.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter as Tally
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec
from longhaul.agent.contract import LiveUpdate
from longhaul.llm.fallback import SWITCH_REASONS
from nats.aio.msg import Msg
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from longhaul.core.connection import Connection
    from longhaul.core.storage import StorageGauge
    from longhaul.gateway.mirror import IndexMirror

log = logging.getLogger(__name__)

LAG_TIMEOUT_S = 2.0


class _IndexCollector(Collector):
    """Traces by status and accumulated usage, from the mirror (no I/O at scrape)."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        mirror = self.metrics.mirror
        traces = GaugeMetricFamily(
            "longhaul_traces", "traces in the index by status", labels=["status"]
        )
        tokens = GaugeMetricFamily(
            "longhaul_trace_tokens", "tokens used by indexed traces", labels=["kind"]
        )
        economy = CounterMetricFamily(
            "longhaul_tokens",
            "tokens of indexed traces: prompt, completion, cache_read, cache_write, and "
            "saved_<saving> (prompt tokens a saving removed, estimated)",
            labels=["kind"],
        )
        hit_ratio = GaugeMetricFamily(
            "longhaul_cache_hit_ratio", "cache_read / prompt tokens of indexed traces"
        )
        cost = GaugeMetricFamily("longhaul_trace_cost_usd", "cost of indexed traces (USD)")
        faulty = GaugeMetricFamily(
            "longhaul_traces_with_faults",
            "indexed traces whose log holds events the fold skipped (undecodable or impossible)",
        )
        faulty_count = 0
        by_status: Tally[str] = Tally()
        sums = {"prompt": 0, "completion": 0, "cache_read": 0, "cache_write": 0}
        saved: Tally[str] = Tally()
        total_cost = 0.0
        for entry in list(mirror.entries.values()) if mirror else []:
            by_status[entry.status] += 1
            sums["prompt"] += entry.totals.prompt_tokens
            sums["completion"] += entry.totals.completion_tokens
            sums["cache_read"] += entry.totals.cache_read_tokens
            sums["cache_write"] += entry.totals.cache_write_tokens
            saved.update(entry.totals.saved_tokens)
            total_cost += entry.totals.cost
            faulty_count += entry.faults > 0
        for status in ("running", "waiting", "completed", "failed", "stopped"):
            traces.add_metric([status], by_status.get(status, 0))
        for kind, value in sums.items():
            tokens.add_metric([kind], value)
            economy.add_metric([kind], value)
        for saving in ("offload", "compaction"):
            economy.add_metric([f"saved_{saving}"], saved.get(saving, 0))
        hit_ratio.add_metric([], sums["cache_read"] / sums["prompt"] if sums["prompt"] else 0.0)
        cost.add_metric([], total_cost)
        faulty.add_metric([], faulty_count)
        yield traces
        yield tokens
        yield economy
        yield hit_ratio
        yield cost
        yield faulty


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.mirror: IndexMirror | None = None
        self.requests = Counter(
            "longhaul_http_requests",
            "HTTP requests",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "longhaul_http_request_duration_seconds",
            "HTTP request latency (streams: lifetime)",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.appended = Counter(
            "longhaul_gateway_events_appended",
            "events the gateway appended",
            ["type"],
            registry=self.registry,
        )
        self.conflicts = Counter(
            "longhaul_gateway_append_conflicts",
            "optimistic-concurrency retries",
            registry=self.registry,
        )
        self.erased = Counter(
            "longhaul_gateway_erased",
            "traces and tasks erased (DELETE), sub-traces and step traces included",
            ["kind"],
            registry=self.registry,
        )
        self.retention_traces = Counter(
            "longhaul_retention_traces_deleted",
            "traces deleted by retention (sub-traces included), by the status they ended with",
            ["status"],
            registry=self.registry,
        )
        self.retention_events = Counter(
            "longhaul_retention_events_deleted",
            "events retention purged from the stream",
            registry=self.registry,
        )
        self.streams = Gauge(
            "longhaul_gateway_open_streams",
            "open SSE/WebSocket streams",
            ["kind"],
            registry=self.registry,
        )
        self.notifications = Counter(
            "longhaul_notifications",
            "notification attempts by webhook, kind and outcome: delivered; retried (failed, "
            "another attempt follows); failed (given up)",
            ["webhook", "kind", "outcome"],
            registry=self.registry,
        )
        self.llm_retries = Counter(
            "longhaul_llm_retries",
            "LLM call retries reported by executors",
            registry=self.registry,
        )
        self.consumer_pending = Gauge(
            "longhaul_consumer_pending",
            "messages not yet delivered to a durable consumer",
            ["consumer"],
            registry=self.registry,
        )
        self.consumer_ack_pending = Gauge(
            "longhaul_consumer_ack_pending",
            "messages delivered but not yet acknowledged",
            ["consumer"],
            registry=self.registry,
        )
        self.storage_used = Gauge(
            "longhaul_storage_used_bytes",
            "bytes the event stream (events) and the object store (objects) hold",
            ["store"],
            registry=self.registry,
        )
        self.storage_limit = Gauge(
            "longhaul_storage_limit_bytes",
            "their size limit (store.max_bytes, store.object_max_bytes; absent: none)",
            ["store"],
            registry=self.registry,
        )
        self.storage_left = Gauge(
            "longhaul_storage_left_bytes",
            "bytes left before the limit (new runs are refused from headroom before it)",
            ["store"],
            registry=self.registry,
        )
        self.storage_full = Gauge(
            "longhaul_storage_full",
            "1 while new runs answer 507 and running traces stop with storage_full",
            registry=self.registry,
        )
        self.circuits_open = Gauge(
            "longhaul_provider_circuit_open",
            "1 while every executor skips this model provider (its circuit is open)",
            ["provider"],
            registry=self.registry,
        )
        self.model_switches = Counter(
            "longhaul_model_switches",
            "traces moved to their next fallback model on a provider outage, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.registry.register(_IndexCollector(self))

    async def refresh_consumer_lag(self, conn: Connection) -> None:
        """Ask JetStream for every durable on the event stream (executor, planner, verifier)."""
        try:
            infos = await asyncio.wait_for(
                conn.js.consumers_info(conn.names.stream), timeout=LAG_TIMEOUT_S
            )
        except Exception as exc:  # metrics must render even when NATS is unwell
            log.warning("cannot read consumer lag: %s", exc)
            return
        self.consumer_pending.clear()
        self.consumer_ack_pending.clear()
        for info in infos:
            name = info.config.durable_name
            if not name:
                continue
            self.consumer_pending.labels(name).set(info.num_pending or 0)
            self.consumer_ack_pending.labels(name).set(info.num_ack_pending or 0)

    async def refresh_storage(self, gauge: StorageGauge) -> None:
        """The stores' fill, read at scrape time (:mod:`longhaul.core.storage`)."""
        try:
            status = await asyncio.wait_for(gauge.status(), timeout=LAG_TIMEOUT_S)
        except Exception as exc:  # metrics must render even when NATS is unwell
            log.warning("cannot read the stores' size: %s", exc)
            return
        for gauge_ in (self.storage_used, self.storage_limit, self.storage_left):
            gauge_.clear()
        for usage in status.stores:
            self.storage_used.labels(usage.store).set(usage.used)
            if usage.limit is not None and usage.left is not None:
                self.storage_limit.labels(usage.store).set(usage.limit)
                self.storage_left.labels(usage.store).set(usage.left)
        self.storage_full.set(status.full is not None)

    def refresh_circuits(self, providers: list[str]) -> None:
        self.circuits_open.clear()
        for provider in providers:
            self.circuits_open.labels(provider).set(1)

    async def on_live(self, msg: Msg) -> None:
        """Core-NATS callback on ``lh.live.>``: count retry notices and model switches, ignore
        token deltas cheaply."""
        if b"retry" not in msg.data and b"switch" not in msg.data:
            return
        try:
            update = msgspec.json.decode(msg.data, type=LiveUpdate)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if update.kind == "retry":
            self.llm_retries.inc()
        elif update.kind == "switch":
            # a bounded label: an executor's reason, or "other"
            reason = update.reason if update.reason in SWITCH_REASONS else "other"
            self.model_switches.labels(reason).inc()


access_log = logging.getLogger("longhaul.gateway.access")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Methods counted under their own name; any other token a client invents is ``other``: each
label value is a series kept for the life of the process, so a client must not mint them."""


def method_label(method: str) -> str:
    return method if method in METHODS else "other"


# Any token is a valid HTTP method, and every label value is kept for ever: methods no route
# serves are counted as one, so an unauthenticated caller cannot grow the registry.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestObserver:
    """Counts and times every HTTP request under its route template and a known method
    (``unmatched`` / ``other`` otherwise: bounded label values whatever clients send) and logs
    it as one JSON line carrying the trace or task id it concerned."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = route.path if isinstance(route, Route) else "unmatched"
            method = scope["method"] if scope["method"] in KNOWN_METHODS else "other"
            elapsed = time.perf_counter() - started
            self.metrics.requests.labels(method_label(method), template, str(status)).inc()
            self.metrics.latency.labels(method_label(method), template).observe(elapsed)
            params = scope.get("path_params") or {}
            access_log.info(
                "%s %s %d %.1fms",
                scope["method"][:16],
                scope["path"],
                status,
                elapsed * 1000,
                extra={"trace_id": params.get("trace_id"), "task_id": params.get("task_id")},
            )
