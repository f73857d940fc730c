"""A gateway :class:`Runtime` with no server behind it, for tests of what the gateway decides
(a path that reached NATS would fail on the missing connection, not pass silently)."""

from __future__ import annotations

from longhaul.core.config import LonghaulConfig
from longhaul.gateway.auth import KeyRing
from longhaul.gateway.metrics import GatewayMetrics
from longhaul.gateway.quota import ActiveQuota
from longhaul.gateway.ratelimit import RateLimiter
from longhaul.gateway.runtime import Runtime


def offline_runtime(config: LonghaulConfig) -> Runtime:
    return Runtime(
        config=config,
        keys=KeyRing([]),
        limiter=RateLimiter(0),
        quota=ActiveQuota(None),
        metrics=GatewayMetrics(),
        heartbeat_s=15.0,
    )
