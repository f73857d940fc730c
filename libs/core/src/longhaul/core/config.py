"""The configuration tree: the engine's sections (``longhaul.domain.config``: models,
pipeline, sandbox, tools, verifier, memory, spend limits) and the deployment's own, which live
here — how to reach NATS, what the gateway serves, how the store is sized and how long ended
traces are kept. Read from ``longhaul.yaml`` (``LONGHAUL_CONFIG``) and ``LONGHAUL_*``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeAlias

from longhaul.domain.config import (
    ConfigError,
    LonghaulSettings,
    MemoryConfig,
    ModelsConfig,
    PipelineConfig,
    RemoteAgentConfig,
    SandboxConfig,
    SpendLimitsConfig,
    ToolsConfig,
    VerifierConfig,
    check_config_file,
)
from longhaul.domain.notify import Webhooks
from pydantic import BaseModel, BeforeValidator, ByteSize, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

AtomicBatches: TypeAlias = bool | Literal["auto"]
"""``nats.atomic_batches``: on, off, or on when the event stream is replicated."""


class NatsConfig(BaseModel):
    url: str = Field(
        default="nats://127.0.0.1:4222",
        description="one server, or several seeds of a cluster separated by commas",
    )
    credentials: str | None = Field(default=None, description="a .creds file (NKEY/JWT)")
    user: str | None = Field(default=None, description="user/password auth (`longhaul up`)")
    password: SecretStr | None = None
    token: SecretStr | None = Field(default=None, description="token auth")
    nkeys_seed: Path | None = Field(default=None, description="an NKey seed file")
    tls_ca: Path | None = Field(default=None, description="CA bundle the server is checked with")
    tls_cert: Path | None = Field(default=None, description="client certificate (mutual TLS)")
    tls_key: Path | None = Field(default=None, description="client certificate's private key")
    replicas: int = Field(default=1, ge=1, le=5)
    namespace: str = Field(default="", description="prefix for stream/bucket names (tests)")
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 5.0
    unavailable_retry_s: float = Field(
        default=20.0,
        ge=0,
        description="how long an append or a read waits out a JetStream leader election or a "
        "lost node (retrying the same message id) before the broker counts as unavailable",
    )
    atomic_batches: AtomicBatches = Field(
        default="auto",
        description="append several events (a step's) as one atomic batch, all or none "
        "(nats-server 2.12+; the event stream gets allow_atomic); false: one by one. auto: "
        "on when the event stream is replicated (replicas > 1), where a batch of 2 costs "
        "~0.55x two appends; off on one replica, where nats-server 2.15 stages each batch "
        "in a new on-disk store (~10x two appends, measured)",
    )

    @property
    def servers(self) -> list[str]:
        """The seed URLs (a client reconnects to any member of the cluster it learns)."""
        return [url.strip() for url in self.url.split(",") if url.strip()]


def _split_csv(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class GatewayConfig(BaseModel):
    host: str = "127.0.0.1"
    port: int = 8080
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=lambda: _split_csv(os.environ.get("LONGHAUL_API_KEYS", "")),
        validate_default=True,
    )
    max_body_bytes: int = 1_048_576
    max_upload_bytes: int = Field(
        default=25 * 1024 * 1024, ge=1, description="one POST …/files request (all its files)"
    )
    upload_quota_bytes_per_key: int = Field(
        default=1024**3, ge=0, description="bytes one API key may upload in total"
    )
    rate_limit_per_minute: int = 600
    schedule_pause_after_failures: int = Field(
        default=10,
        ge=0,
        description="failed ticks in a row after which a schedule pauses itself, with its "
        "reason and a schedule.failed notice (0: never)",
    )
    webhook_rate_limit_per_minute: int = Field(
        default=60,
        ge=0,
        description="signed webhook requests (POST /api/triggers/{id}) one caller address may "
        "make, refused with 429 before the trigger is looked up (0: no limit)",
    )
    max_active_traces_per_key: int | None = Field(
        default=None,
        ge=1,
        description="traces one API key may have running or waiting at once (None: no cap); "
        "beyond it starting a run answers 429 with Retry-After",
    )
    folds_cached: int = Field(
        default=8,
        ge=0,
        description="trace folds the gateway keeps between the viewer's reads (an LRU by "
        "count: each holds a whole trace in memory, a 100,000-step one about 235 MB); "
        "a request catches its fold up with the log and reads only the new events (0: none)",
    )
    cors_origins: list[str] = Field(default_factory=list)
    completion_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="how long POST /v1/chat/completions (and an MCP call that follows a run) "
        "waits for the run to settle before answering where it can be followed",
    )
    metrics_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=lambda: _split_csv(os.environ.get("LONGHAUL_METRICS_KEYS", "")),
        validate_default=True,
        description="bearer keys of the operator's scraper for /metrics (every key's totals); "
        "none: a gateway with API keys serves /metrics to no one",
    )

    admin_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=lambda: _split_csv(os.environ.get("LONGHAUL_ADMIN_KEYS", "")),
        validate_default=True,
        description="bearer keys of the operator for /api/admin (erasing a key's data); "
        "none: a gateway with API keys serves /api/admin to no one",
    )

    @field_validator("api_keys", "metrics_keys", "admin_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> Any:
        return _split_csv(value) if isinstance(value, str) else value


class StoreConfig(BaseModel):
    snapshot_every: int = 200
    lease_ttl_s: float = 5.0
    max_bytes: ByteSize | None = Field(
        default=None,
        description="size limit of the event stream (e.g. 20GiB); unset: `longhaul up` sizes it "
        "to the disk, a service on its own leaves the stream's limit as it is",
    )
    object_max_bytes: ByteSize | None = Field(
        default=None, description="size limit of the object store (large payloads), likewise"
    )
    headroom: float = Field(
        default=0.05,
        ge=0,
        lt=0.5,
        description="share of each limit kept for running traces to stop: past the rest, new "
        "runs answer 507 and running traces stop with storage_full",
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def _duration_s(value: Any) -> Any:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or a number of seconds, as seconds."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a duration like 30d, 12h, 90m, 45s or 2w")
        return float(match[1]) * _UNIT_S[match[2]]
    return value


Duration = Annotated[Annotated[float, Field(gt=0)] | None, BeforeValidator(_duration_s)]


class RetentionConfig(BaseModel):
    """How long an ended trace is kept after it ended, per final status (none: for ever).
    The gateway deletes an expired top-level trace with its sub-traces as
    ``DELETE /api/traces/{id}`` does; a task's step traces stay with their task."""

    completed: Duration = None
    failed: Duration = None
    stopped: Duration = None
    sweep_interval_s: float = Field(default=60.0, gt=0, description="between sweeps")

    def keep_s(self, status: str) -> float | None:
        """Seconds a trace ended with ``status`` is kept (None: for ever)."""
        kept: float | None = getattr(self, status) if status in _FINAL else None
        return kept


_FINAL = ("completed", "failed", "stopped")


class LonghaulConfig(LonghaulSettings):
    """The whole configuration tree."""

    nats: NatsConfig = Field(default_factory=NatsConfig)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    spend_limits: SpendLimitsConfig = Field(default_factory=SpendLimitsConfig)
    working_root: Path | None = Field(
        default=None,
        description="where traces work, each key in its own keys/<key id>/ (executor and "
        "verifier; default: the current directory)",
    )
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    remote_agents: dict[str, RemoteAgentConfig] = Field(default_factory=dict)
    notify: Webhooks = Field(
        default_factory=list,
        description="webhooks told of runs ending, waiting for a person, nearing a budget "
        "(the gateway's notifier; env LONGHAUL_NOTIFY as JSON)",
    )
    data_dir: Path = Path(".longhaul")


CONFIG_ERROR_EXIT = 78
"""Exit status of a process refusing its configuration (``EX_CONFIG``): a supervisor does not
restart it, since the same configuration would fail the same way."""


def load_config(**overrides: Any) -> LonghaulConfig:
    """Load config from file and environment; ``overrides`` win over both."""
    check_config_file()
    try:
        return LonghaulConfig(**overrides)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
