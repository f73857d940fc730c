"""What the routes share: config, keys, limiter, metrics, and — once the lifespan has
connected — the NATS connection, event store, trace index and its mirror."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import nats.errors
import nats.js.errors
from fastapi import FastAPI
from longhaul.agent import turn_settings
from longhaul.agent.presets import PresetCatalog
from longhaul.core.config import LonghaulConfig
from longhaul.core.index import TraceIndex
from longhaul.core.repository import Repository
from longhaul.core.service import ServiceContext
from longhaul.core.transient import BrokerUnavailable, is_storage_full
from longhaul.domain.state import ScheduleState, TaskState, TraceState
from longhaul.gateway.auth import KeyRing
from longhaul.gateway.errors import ApiError
from longhaul.gateway.metrics import GatewayMetrics
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.quota import ActiveQuota
from longhaul.gateway.ratelimit import RateLimiter
from longhaul.gateway.schedules.store import ScheduleStore
from longhaul.llm.registry import ModelRegistry, is_scripted
from longhaul.llm.types import Model

RETRY = {"Retry-After": "1"}
"""While the log is unreachable: the client's NATS reconnects every half second."""


def _not_connected() -> ApiError:
    return ApiError(503, "unavailable", "gateway is not connected to NATS yet", headers=RETRY)


@dataclass
class Runtime:
    config: LonghaulConfig
    keys: KeyRing
    limiter: RateLimiter
    quota: ActiveQuota
    metrics: GatewayMetrics
    heartbeat_s: float
    metrics_keys: KeyRing = field(default_factory=lambda: KeyRing([]))
    """The operator's scraper keys (``gateway.metrics_keys``), distinct from the tenants'."""
    admin_keys: KeyRing = field(default_factory=lambda: KeyRing([]))
    """The operator's keys for ``/api/admin`` (``gateway.admin_keys``)."""
    webhook_limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0))
    """Per caller address, in front of the signed webhook
    (``gateway.webhook_rate_limit_per_minute``)."""
    draining: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the server is asked to stop: live streams end so shutdown is not held up."""
    ctx: ServiceContext | None = None
    models: ModelRegistry | None = None
    """Set by the lifespan: the one model the gateway asks is the router's utility model."""
    executors_checked: tuple[float, tuple[str, str]] | None = None
    """``/readyz``'s last look at the executors (monotonic time, result), reused briefly."""
    _mirror: IndexMirror | None = field(default=None, init=False)
    _schedule_store: ScheduleStore | None = field(default=None, init=False)
    _viewed_traces: Repository[TraceState] | None = field(default=None, init=False)

    def connect(self, ctx: ServiceContext) -> IndexMirror:
        """Attach the connection and the trace index's two copies: the ``lh_traces`` KV
        (:attr:`index`, written) and its in-memory mirror (:attr:`mirror`, read by listings);
        returns the mirror, whose follower the caller runs."""
        self.ctx = ctx
        self._schedule_store = None
        self._viewed_traces = None
        self._mirror = IndexMirror(ctx.conn)
        return self._mirror

    @functools.cached_property
    def presets(self) -> PresetCatalog:
        return PresetCatalog(self.config.presets)

    def max_iterations(self, state: TraceState) -> int:
        """The iteration limit a turn of ``state`` runs with: the same rule as the engine's."""
        preset = self.presets.get(state.config.preset)
        return turn_settings.max_iterations(state.config, preset, self.config.pipeline)

    def utility_model(self) -> Model | None:
        """The utility model, or ``None`` when it is offline or cannot be built (rules then)."""
        model_string = self.config.models.for_role("utility")
        if self.models is None or is_scripted(model_string):
            return None
        try:
            return self.models.resolve(model_string)
        except ValueError:
            return None

    @property
    def service(self) -> ServiceContext:
        if self.ctx is None:
            raise _not_connected()
        return self.ctx

    @property
    def traces(self) -> Repository[TraceState]:
        return self.service.traces

    @property
    def viewed_traces(self) -> Repository[TraceState]:
        """Trace folds kept between reads (``gateway.folds_cached``), for the routes that
        only read a trace (the viewer's): each request catches the fold up with the log.
        Never saved through: a write folds its own copy (:attr:`traces`)."""
        if self._viewed_traces is None:
            self._viewed_traces = self.service.followed_traces(self.config.gateway.folds_cached)
        return self._viewed_traces

    @property
    def tasks(self) -> Repository[TaskState]:
        return self.service.tasks

    @property
    def schedules(self) -> Repository[ScheduleState]:
        """The schedules' logs (their failed ticks); the records are :attr:`schedule_store`."""
        return self.service.schedules

    @property
    def schedule_store(self) -> ScheduleStore:
        """The ``lh_schedules`` bucket (schedules and triggers), built once per connection."""
        if self._schedule_store is None:
            self._schedule_store = ScheduleStore(self.service.conn)
        return self._schedule_store

    @property
    def index(self) -> TraceIndex:
        return self.service.index

    @property
    def mirror(self) -> IndexMirror:
        if self._mirror is None:
            raise _not_connected()
        return self._mirror

    @property
    def deadline_s(self) -> float:
        """Budget for one request's JetStream work: a fold plus an append, each of which may
        wait out a leader election (``nats.unavailable_retry_s``) before answering."""
        nats = self.config.nats
        return nats.request_timeout_s * 2 + 2 * nats.unavailable_retry_s

    @contextlib.asynccontextmanager
    async def nats_call(self) -> AsyncIterator[None]:
        """Bound a request's NATS work in time and turn an unreachable server into 503, a
        full one into 507."""
        try:
            async with asyncio.timeout(self.deadline_s):
                yield
        except nats.js.errors.APIError as exc:
            if not is_storage_full(exc):
                raise _unavailable(exc) from exc
            self.service.storage.refused(exc)
            raise ApiError.insufficient_storage(
                f"the event store refused the write ({exc.description}): delete traces or "
                "raise store.max_bytes"
            ) from exc
        except (TimeoutError, nats.errors.Error, OSError, BrokerUnavailable) as exc:
            raise _unavailable(exc) from exc


def _unavailable(exc: BaseException) -> ApiError:
    return ApiError(
        503, "unavailable", f"event store unavailable: {type(exc).__name__}", headers=RETRY
    )


def runtime_of(app: FastAPI) -> Runtime:
    runtime: Runtime = app.state.runtime
    return runtime
