"""Shared fixtures: one real nats-server per session, a fresh namespace per test, and (for
the CLI and the run viewer) a gateway with an executor behind it."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore

from tests.slow import heaviest_first, is_slow
from tests.support.env import SCRIPTED_DIR_VAR
from tests.support.nats import nats_server_url, unique_namespace

# pytest keeps its assertion-rewritten test modules in __pycache__ only where bytecode may be
# written: under PYTHONDONTWRITEBYTECODE every worker rewrote all ~270 modules on every run
# (about 6 s of each worker's collection).
sys.dont_write_bytecode = False

if TYPE_CHECKING:
    from tests.integration.gateway.harness import RunningGateway


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests listed in ``tests/slow.py`` (``-m "not slow"`` is the inner loop), and
    put its heaviest files first (``make test`` keeps that order: ``--no-loadscope-reorder``)."""
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
    items[:] = [items[i] for i in heaviest_first([item.nodeid for item in items])]


@pytest.fixture(scope="session", autouse=True)
def scripted_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Scripts a test writes under its ``tmp_path`` are the only ``scripted:<file>`` models
    services may read (``models.scripted_dir``), in-process and in subprocesses alike."""
    root = tmp_path_factory.getbasetemp()
    previous = os.environ.get(SCRIPTED_DIR_VAR)
    os.environ[SCRIPTED_DIR_VAR] = str(root)
    yield root
    if previous is None:
        os.environ.pop(SCRIPTED_DIR_VAR, None)
    else:
        os.environ[SCRIPTED_DIR_VAR] = previous


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
    return EventStore(conn)


@pytest.fixture
async def stack(
    nats_config: NatsConfig, nats_url: str, namespace: str, tmp_path: Path
) -> AsyncIterator[RunningGateway]:
    """A gateway (1 s SSE heartbeats) and an in-process executor working under
    ``tmp_path / "work"``: a whole stack but the planner."""
    # Imported here: most tests never start a gateway.
    from tests.integration.gateway.harness import gateway_config, serve_gateway
    from tests.support.stack import InProcessExecutor

    async with serve_gateway(gateway_config(nats_config), heartbeat_s=1.0) as gateway:
        async with InProcessExecutor(
            nats_url, namespace, "exec-stack", settings={"working_root": tmp_path / "work"}
        ):
            yield gateway
