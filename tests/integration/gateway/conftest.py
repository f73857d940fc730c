"""Gateway fixtures: keyless gateways on the session's nats-server.

``gateway`` is per test (fresh namespace, for tests that count what reaches the log);
``shared_gateway`` is per module, for the many small request/response checks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.store import EventStore

from tests.integration.gateway.harness import (
    KEY_A,
    KEY_B,
    RunningGateway,
    gateway_config,
    serve_gateway,
)
from tests.support.nats import unique_namespace
from tests.support.stack import InProcessExecutor


@pytest.fixture
async def gateway(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    async with serve_gateway(gateway_config(nats_config), heartbeat_s=0.3) as running:
        yield running


@pytest.fixture
async def client(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client() as http:
        yield http


@pytest.fixture(scope="module")
async def shared_gateway(nats_url: str) -> AsyncIterator[RunningGateway]:
    config = gateway_config(NatsConfig(url=nats_url, namespace=unique_namespace()))
    async with serve_gateway(config, heartbeat_s=0.3) as running:
        yield running


@pytest.fixture
async def shared_client(shared_gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with shared_gateway.client() as http:
        yield http


@pytest.fixture
async def shared_store(shared_gateway: RunningGateway) -> AsyncIterator[EventStore]:
    """A store on the shared gateway's namespace (its own connection)."""
    conn: Connection = await connect(shared_gateway.runtime.config.nats)
    try:
        yield EventStore(conn)
    finally:
        await conn.close()


@pytest.fixture
async def keyed_stack(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[RunningGateway]:
    """A gateway with two API keys (``KEY_A``, ``KEY_B``) and an executor behind it: for the
    protocol surfaces' tests, which drive runs and check that the keys never meet."""
    config = gateway_config(nats_config, api_keys=f"{KEY_A},{KEY_B}")
    async with serve_gateway(config, heartbeat_s=1.0) as gateway:
        async with InProcessExecutor(
            nats_url, namespace, "exec-keyed", settings={"working_root": tmp_path / "work"}
        ):
            yield gateway
