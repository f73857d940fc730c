"""Prometheus metrics of one executor replica.

They live in their own :class:`CollectorRegistry` so several in-process executors (tests) do not
collide, and so the gateway or ``LONGHAUL_EXECUTOR__METRICS_PORT`` can expose exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


@dataclass
class ExecutorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        counter = partial(Counter, registry=self.registry)
        self.turns = counter("longhaul_executor_turns", "turns run, by how they ended", ["end"])
        self.steps = counter("longhaul_executor_steps", "engine steps (model calls)")
        self.events = counter("longhaul_executor_events_appended", "events appended by turns")
        self.conflicts = counter(
            "longhaul_executor_conflicts",
            "appends that met another writer (optimistic concurrency)",
            ["outcome"],
        )
        self.lease_takeovers = counter(
            "longhaul_executor_lease_takeovers",
            "traces resumed after another executor's lease expired",
        )
        self.leases_lost = counter(
            "longhaul_executor_leases_lost", "turns that lost their lease while running"
        )
        self.poison = counter(
            "longhaul_executor_poison_events", "wake-ups terminated after repeated failures"
        )
        self.handler_errors = counter(
            "longhaul_executor_handler_errors", "wake-up handlings that raised"
        )
        self.swept = counter(
            "longhaul_executor_swept", "running traces without a lease woken by the sweeper"
        )
        self.subtraces = counter("longhaul_executor_subtraces_started", "child traces created")
        self.active_turns = Gauge(
            "longhaul_executor_active_turns", "turns running now", registry=self.registry
        )

    def serve(self, port: int) -> WSGIServer:
        """Expose ``/metrics`` on ``port`` from a daemon thread; ``shutdown()`` the returned
        server to stop it."""
        server, _thread = start_http_server(port, registry=self.registry)
        return server
