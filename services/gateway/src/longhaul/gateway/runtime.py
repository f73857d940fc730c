"""What the routes share: config, keys, limiter, metrics, and — once the lifespan has
connected — the NATS connection, event store, trace index and its mirror."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import nats.errors
from fastapi import FastAPI
from longhaul.core.config import LonghaulConfig
from longhaul.core.index import TraceIndex
from longhaul.core.service import ServiceContext
from longhaul.core.store import EventStore
from longhaul.gateway.auth import KeyRing
from longhaul.gateway.errors import ApiError
from longhaul.gateway.metrics import GatewayMetrics
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.ratelimit import RateLimiter


@dataclass
class Runtime:
    config: LonghaulConfig
    keys: KeyRing
    limiter: RateLimiter
    metrics: GatewayMetrics
    heartbeat_s: float
    draining: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the server is asked to stop: live streams end so shutdown is not held up."""
    ctx: ServiceContext | None = None
    index: TraceIndex | None = None
    mirror: IndexMirror | None = None

    @property
    def service(self) -> ServiceContext:
        if self.ctx is None:
            raise ApiError(503, "unavailable", "gateway is not connected to NATS yet")
        return self.ctx

    @property
    def store(self) -> EventStore:
        return self.service.store

    @property
    def traces(self) -> TraceIndex:
        if self.index is None:
            raise ApiError(503, "unavailable", "gateway is not connected to NATS yet")
        return self.index

    @property
    def view(self) -> IndexMirror:
        if self.mirror is None:
            raise ApiError(503, "unavailable", "gateway is not connected to NATS yet")
        return self.mirror

    @property
    def deadline_s(self) -> float:
        """Budget for one request's JetStream work (a fold plus an append, with retries)."""
        return self.config.nats.request_timeout_s * 3

    @contextlib.asynccontextmanager
    async def nats_call(self) -> AsyncIterator[None]:
        """Bound a request's NATS work in time and turn an unreachable server into 503."""
        try:
            async with asyncio.timeout(self.deadline_s):
                yield
        except (TimeoutError, nats.errors.Error, OSError) as exc:
            raise ApiError(
                503, "unavailable", f"event store unavailable: {type(exc).__name__}",
                headers={"Retry-After": "1"},
            ) from exc


def runtime_of(app: FastAPI) -> Runtime:
    runtime: Runtime = app.state.runtime
    return runtime
