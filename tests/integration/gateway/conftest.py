"""Gateway fixtures: a gateway per test (fresh namespace), keyless unless a test asks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from longhaul.core.config import NatsConfig
from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config), heartbeat_s=0.3) as running:
        yield running


@pytest.fixture
async def client(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client() as http:
        yield http
