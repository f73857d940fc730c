"""Fixtures for planner tests: a config factory bound to this test's namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.domain.config import CheckpointConfig, ModelsConfig, PipelineConfig

ConfigFactory = Callable[..., LonghaulConfig]


@pytest.fixture
def make_config(nats_config: NatsConfig) -> ConfigFactory:
    def factory(
        *, roles: dict[str, str] | None = None, checkpoints: bool = True, **pipeline: Any
    ) -> LonghaulConfig:
        return LonghaulConfig(
            nats=nats_config,
            models=ModelsConfig(default="scripted:auto", roles=roles or {}),
            pipeline=PipelineConfig(checkpoint=CheckpointConfig(enabled=checkpoints), **pipeline),
        )

    return factory
