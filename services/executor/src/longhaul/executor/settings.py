"""Executor-only settings, read from ``LONGHAUL_EXECUTOR__*`` (the shared config ignores them).

They live here rather than in ``longhaul.domain.config`` because no other service reads them.
The executor's identity is ``LONGHAUL_EXECUTOR_ID`` (default ``<hostname>-<pid>``), a separate
variable so a supervisor can name replicas without touching the rest of the configuration.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def default_executor_id() -> str:
    return os.environ.get("LONGHAUL_EXECUTOR_ID") or f"{socket.gethostname()}-{os.getpid()}"


class ExecutorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LONGHAUL_EXECUTOR__", extra="ignore")

    id: str = Field(default_factory=default_executor_id)
    concurrency: int = Field(default=64, ge=1, description="turns run at once by one replica")
    durable: str = Field(default="executor", description="durable consumer name (per namespace)")
    ack_wait_s: float = Field(default=6.0, gt=0)
    poison_attempts: int = Field(
        default=5, ge=1, description="failed handlings of one event before it is terminated"
    )
    sweep_interval_s: float = Field(default=2.0, gt=0)
    index_interval_s: float = Field(
        default=1.0, ge=0, description="minimum time between lh_traces updates during a turn"
    )
    metrics_port: int | None = Field(default=None, description="serve /metrics directly")
    tool_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="python modules imported at start (comma-separated); they register tools",
    )
    shutdown_grace_s: float = Field(default=8.0, gt=0)
    working_root: Path | None = Field(
        default=None, description="where traces work (default: the current directory)"
    )
    import_user: str | None = Field(
        default=None,
        description="the NATS user imported logs are written as (its own connection; "
        "`longhaul up` and `longhaul nats-auth` set it); unset: the executor's connection",
    )
    import_password: SecretStr | None = None

    @field_validator("tool_modules", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value
