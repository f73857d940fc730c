"""Prometheus metrics of one executor replica.

They live in their own :class:`CollectorRegistry` so several in-process executors (tests) do not
collide, and so the gateway or ``LONGHAUL_EXECUTOR__METRICS_PORT`` can expose exactly these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from longhaul.domain.state import Message
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

OTHER = "other"


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
        self.cost = Counter(
            "longhaul_model_cost_usd",
            "dollars model calls cost, by model and preset (counted once across executors; "
            "a model or preset the config does not name is other)",
            ["model", "preset"],
            registry=r,
        )
        self.tokens = Counter(
            "longhaul_model_tokens",
            "prompt and completion tokens of model calls, by model and preset (as the cost)",
            ["model", "preset", "kind"],
            registry=r,
        )
        self.known_models: frozenset[str] = frozenset()
        """Model label values (``SpendLabels``): each is a series kept for ever."""
        self.known_presets: frozenset[str] = frozenset()

    def charge(self, messages: Sequence[Message], preset: str) -> None:
        """Count what :class:`~longhaul.core.spend.SpendLedger` just counted."""
        preset_label = preset if preset in self.known_presets else OTHER
        for message in messages:
            model = message.model if message.model in self.known_models else OTHER
            self.cost.labels(model, preset_label).inc(message.cost)
            if message.usage is not None:
                self.tokens.labels(model, preset_label, "prompt").inc(message.usage.prompt_tokens)
                completion = message.usage.completion_tokens
                self.tokens.labels(model, preset_label, "completion").inc(completion)

    def serve(self, port: int) -> WSGIServer:
        """Expose ``/metrics`` on ``port`` from a daemon thread; ``shutdown()`` the returned
        server to stop it."""
        server, _thread = start_http_server(port, registry=self.registry)
        return server
