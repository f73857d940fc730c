"""A gateway and an executor for the CLI to talk to."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from longhaul.core.config import NatsConfig

from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway
from tests.support.stack import InProcessExecutor


@pytest.fixture
async def stack(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config), heartbeat_s=1.0) as gateway:
        async with InProcessExecutor(
            nats_url, namespace, "exec-cli-tests", settings={"working_root": tmp_path}
        ):
            yield gateway
