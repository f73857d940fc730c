"""Prometheus metrics of one executor replica.

They live in their own :class:`CollectorRegistry` so several in-process executors (tests) do not
collide, and so the gateway or ``LONGHAUL_EXECUTOR__METRICS_PORT`` can expose exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


@dataclass
class ExecutorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.turns = Counter(
            "longhaul_executor_turns", "turns run, by how they ended", ["end"], registry=r
        )
        self.steps = Counter("longhaul_executor_steps", "engine steps (model calls)", registry=r)
        self.events = Counter(
            "longhaul_executor_events_appended", "events appended by turns", registry=r
        )
        self.conflicts = Counter(
            "longhaul_executor_conflicts",
            "appends that met another writer (optimistic concurrency)",
            ["outcome"],
            registry=r,
        )
        self.lease_takeovers = Counter(
            "longhaul_executor_lease_takeovers",
            "traces resumed after another executor's lease expired",
            registry=r,
        )
        self.leases_lost = Counter(
            "longhaul_executor_leases_lost", "turns that lost their lease while running", registry=r
        )
        self.poison = Counter(
            "longhaul_executor_poison_events",
            "wake-ups terminated after repeated failures",
            registry=r,
        )
        self.handler_errors = Counter(
            "longhaul_executor_handler_errors", "wake-up handlings that raised", registry=r
        )
        self.swept = Counter(
            "longhaul_executor_swept",
            "running traces without a lease woken by the sweeper",
            registry=r,
        )
        self.subtraces = Counter(
            "longhaul_executor_subtraces_started", "child traces created", registry=r
        )
        self.active_turns = Gauge("longhaul_executor_active_turns", "turns running now", registry=r)

    def serve(self, port: int) -> WSGIServer:
        """Expose ``/metrics`` on ``port`` from a daemon thread; ``shutdown()`` the returned
        server to stop it."""
        server, _thread = start_http_server(port, registry=self.registry)
        return server
