"""Shared fixtures: one real nats-server per session, a fresh namespace per test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore

from tests.support.nats import nats_server_url, unique_namespace


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    with nats_server_url() as url:
        yield url


@pytest.fixture
def namespace() -> str:
    return unique_namespace()


@pytest.fixture
def nats_config(nats_url: str, namespace: str) -> NatsConfig:
    return NatsConfig(url=nats_url, namespace=namespace)


@pytest.fixture
async def conn(nats_config: NatsConfig) -> AsyncIterator[Connection]:
    connection = await connect(nats_config, provision_settings=ProvisionSettings())
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
async def store(conn: Connection) -> EventStore:
    return EventStore(conn, snapshot_every=50)
