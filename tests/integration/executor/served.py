"""A gateway and an in-process executor over one namespace, for tests that drive a trace
through the HTTP API while reading the model's requests on a fake's wire."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from longhaul.core.config import LonghaulConfig, NatsConfig

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.support.stack import InProcessExecutor


@contextlib.asynccontextmanager
async def gateway_and_executor(
    nats_config: NatsConfig, config: LonghaulConfig, working_root: Path, executor_id: str
) -> AsyncIterator[RunningGateway]:
    """``config`` is the executor's (its models point at the fake); the gateway needs none."""
    async with serve_gateway(gateway_config(nats_config)) as gateway, InProcessExecutor(
        config.nats.url, config.nats.namespace, executor_id, config=config,
        settings={"working_root": working_root},
    ):  # fmt: skip
        yield gateway
