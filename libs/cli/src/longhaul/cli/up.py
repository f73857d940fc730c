"""``longhaul up``: embedded JetStream plus every service, supervised, on one machine.

Ports may be 0 (pick a free one). The resolved URLs and the child pids are written to
``<data-dir>/up.json`` while the stack runs, for scripts and tests that need to find it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
from longhaul.cli.backup import restore_deployment
from longhaul.cli.disk_limits import sized_to_disk
from longhaul.cli.embedded_nats import SupervisedNats
from longhaul.cli.supervisor import ChildSpec, Supervisor
from longhaul.core import nats_auth
from longhaul.core.config import LonghaulConfig, load_config
from longhaul.core.connection import Connection, connect
from longhaul.core.nats_server import NatsServer, free_port
from longhaul.domain.config import ConfigError
from longhaul.domain.liveness import DEAD_RECORD_TTL_S, ProcessExited, dead_key
from longhaul.domain.names import Names
from longhaul.domain.offline import offline_notice
from longhaul.executor.main import check_executor_config
from longhaul.gateway.main import bind_host
from pydantic import SecretStr
from rich.console import Console
from rich.panel import Panel

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
READY_POLL_S = 0.1


def service_specs(
    executors: int, host: str, port: int, credentials: nats_auth.Credentials | None = None
) -> list[ChildSpec]:
    """The children of ``longhaul up``; with ``credentials`` each connects as its own NATS user."""

    def auth(user: str) -> dict[str, str]:
        return nats_auth.service_env(credentials, user) if credentials else {}

    specs = [
        ChildSpec(
            "gateway",
            "longhaul.gateway.main",
            {
                "LONGHAUL_GATEWAY__HOST": host,
                "LONGHAUL_GATEWAY__PORT": str(port),
                **auth("gateway"),
            },
        ),
        ChildSpec("planner", "longhaul.planner.main", auth("planner")),
        ChildSpec("verifier", "longhaul.verifier.main", auth("verifier")),
    ]
    specs += [
        ChildSpec(
            f"executor-{i}",
            "longhaul.executor.main",
            {"LONGHAUL_EXECUTOR_ID": f"exec-{i}", **auth("executor")},
        )
        for i in range(1, executors + 1)
    ]
    return specs


@contextlib.contextmanager
def _importable_from(folder: Path) -> Iterator[None]:
    """Modules in ``folder`` importable while the block runs (as ``python -m`` makes them)."""
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))


async def wait_for_gateway(url: str, stop: asyncio.Event) -> dict[str, Any] | None:
    """Poll ``/readyz`` until it answers 200 (its body), or give up on a deadline or a stop
    request (``None``). Readiness is only observable over HTTP, hence the polling."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with httpx.AsyncClient(timeout=2.0) as http:
        while time.monotonic() < deadline and not stop.is_set():
            try:
                response = await http.get(f"{url}/readyz")
                if response.status_code == 200:
                    body = response.json()
                    return body if isinstance(body, dict) else {}
            except (httpx.HTTPError, ValueError):
                pass
            try:
                await asyncio.wait_for(stop.wait(), timeout=READY_POLL_S)
            except TimeoutError:
                continue
    return None


def degraded_line(readiness: dict[str, Any] | None) -> str | None:
    """One banner line when the gateway is ready but ``degraded`` (tool processes refused)."""
    if readiness is None or readiness.get("status") != "degraded":
        return None
    reason = readiness.get("checks", {}).get("sandbox", "see /readyz")
    return f"degraded:  bash, command checks and per-key MCP servers are refused: {reason}"


class ExitReporter:
    """Tells the services on ``Names.process_exits`` which incarnation of a child died, so its
    peers release its leases now rather than at their TTL."""

    def __init__(self, config: LonghaulConfig, nats_url: str) -> None:
        self.config = config.nats.model_copy(update={"url": nats_url})
        self.conn: Connection | None = None

    def authenticate(self, credentials: nats_auth.Credentials) -> None:
        self.config = self.config.model_copy(
            update={"user": "supervisor", "password": SecretStr(credentials["supervisor"])}
        )

    async def __call__(self, spec: ChildSpec, incarnation: str, code: int) -> None:
        if self.conn is None:
            self.conn = await connect(self.config, name="longhaul-up")
        notice = ProcessExited(
            service=spec.module.split(".")[1],
            id=spec.env.get("LONGHAUL_EXECUTOR_ID", spec.name),
            incarnation=incarnation,
            code=code,
        )
        data = msgspec.json.encode(notice)
        await self.conn.nc.publish(self.conn.names.process_exits, data)
        await asyncio.wait_for(self.conn.nc.flush(), timeout=2.0)
        # Also a record, for a successor that was not yet listening (a restarted verifier
        # finding its predecessor's claim): kept for a minute, far past any redelivery.
        kv = await self.conn.kv(self.conn.names.leases)
        await kv.create(dead_key(incarnation), data, msg_ttl=DEAD_RECORD_TTL_S)

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()


def banner(
    config: LonghaulConfig,
    *,
    gateway_url: str,
    nats_url: str,
    embedded: bool,
    data_dir: Path,
    executors: int,
    work_dir: Path,
    ready: bool,
    storage: str | None = None,
    degraded: str | None = None,
) -> Panel:
    keyless = not config.gateway.api_keys
    model = f"model:     {config.models.default}"
    lines = [
        "[bold]longhaul[/bold] — local development stack",
        f"gateway:   {gateway_url}   (viewer at /, API at /api, docs at /docs)",
        f"nats:      {nats_url}"
        + (
            f"   (embedded, data in {data_dir}; per-service users, "
            f"admin password in {data_dir / nats_auth.CREDENTIALS_FILE})"
            if embedded
            else ""
        ),
        f"services:  gateway, planner, verifier, {executors} executor(s); "
        f"logs in {data_dir / 'logs'}",
        f"workdir:   {work_dir}   (where agents read and write files)",
        model,
    ]
    if storage is not None:
        lines.append(storage)
    if config.models.is_offline_default:
        lines.append(f"[yellow]{offline_notice(config.models.default)}[/yellow]")
    if keyless:
        lines.append("auth:      none (loopback only; set LONGHAUL_API_KEYS to require keys)")
    if degraded is not None:
        lines.append(f"[yellow]{degraded}[/yellow]")
    if not ready:
        log_file = data_dir / "logs" / "gateway.log"
        lines.append(f"[red]the gateway is not ready yet: see {log_file}[/red]")
    lines.append('try:       longhaul run -f README.md "summarise it"   ·   Ctrl-C stops all')
    return Panel.fit("\n".join(lines), title="longhaul up")


def prepare_dirs(data_dir: Path) -> tuple[Path, Path]:
    """Create the data dir (with ``logs/``) and the agents' workdir
    (``LONGHAUL_EXECUTOR__WORKING_ROOT`` or ``<data-dir>/work``); returns both, absolute."""
    data_dir = data_dir.resolve()
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    work_dir = Path(os.environ.get("LONGHAUL_EXECUTOR__WORKING_ROOT", data_dir / "work")).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    return data_dir, work_dir


async def run_up(
    *,
    host: str,
    port: int,
    data_dir: Path,
    work_dir: Path,
    executors: int,
    nats_url: str | None,
    nats_port: int,
    console: Console,
    restore: Path | None = None,
    replace: bool = False,
) -> None:
    """Raises :class:`ConfigError` (naming the key) before starting anything when the
    configuration is bad, and after stopping everything when a service refused its own.
    With ``restore`` the backup in that directory is restored into NATS and the workdir
    before any service starts (:class:`BackupError` when it cannot be, nothing started)."""
    config = load_config()
    # The executor's own check too: a tool module that cannot be imported stops `up` here,
    # looked up as the executor will (`python -m` in this directory: its modules importable).
    with _importable_from(Path.cwd()):
        check_executor_config(config)
    logs = data_dir / "logs"
    host = bind_host(
        config.model_copy(update={"gateway": config.gateway.model_copy(update={"host": host})})
    )
    port = port or free_port(host)
    gateway_url = f"http://{host}:{port}"
    server: NatsServer | None = None
    embedded: SupervisedNats | None = None
    credentials: nats_auth.Credentials | None = None
    credentials_file: Path | None = None
    limits: dict[str, str] = {}
    storage: str | None = None
    if nats_url is None:
        # The embedded server binds loopback and admits only the users generated here.
        credentials, credentials_file = nats_auth.load_or_create(data_dir)
        server = NatsServer(
            data_dir / "jetstream",
            port=nats_port,
            log_file=logs / "nats-server.log",
            authorization=nats_auth.authorization_block(credentials, Names(config.nats.namespace)),
        )
        embedded = SupervisedNats(server, on_change=lambda: write_state())
        await embedded.start()
        nats_url = server.url
        limits, storage = sized_to_disk(config, data_dir / "jetstream")
    env = {
        **os.environ,
        **limits,
        "LONGHAUL_NATS__URL": nats_url,
        "LONGHAUL_DATA_DIR": str(data_dir),
        "LONGHAUL_EXECUTOR__WORKING_ROOT": str(work_dir),
        "LONGHAUL_WORKING_ROOT": str(work_dir),  # the verifier finds traces' directories
    }
    state_file = data_dir / "up.json"

    def write_state() -> None:
        state = {
            "pid": os.getpid(),
            "gateway": gateway_url,
            "nats": nats_url,
            "nats_pid": server.pid if server else None,
            "nats_credentials": str(credentials_file) if credentials_file else None,
            "children": supervisor.pids(),
        }
        state_file.write_text(json.dumps(state, indent=2))

    reporter = ExitReporter(config, nats_url)
    if credentials is not None:
        reporter.authenticate(credentials)
    supervisor = Supervisor(
        service_specs(executors, host, port, credentials),
        base_env=env,
        log_dir=logs,
        on_change=write_state,
        on_exit=reporter,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    async def stop_on_refusal() -> None:
        await supervisor.refused.wait()
        stop.set()

    refusal = asyncio.create_task(stop_on_refusal())
    try:
        if restore is not None:
            admin = config.nats.model_copy(update={"url": nats_url})
            if credentials is not None:
                admin = admin.model_copy(
                    update={"user": "admin", "password": SecretStr(credentials["admin"])}
                )
            await restore_deployment(admin, restore, work_dir, replace=replace, out=console)
        await supervisor.start()
        readiness = await wait_for_gateway(gateway_url, stop)
        if not stop.is_set():
            console.print(
                banner(
                    config,
                    gateway_url=gateway_url,
                    nats_url=nats_url,
                    embedded=server is not None,
                    data_dir=data_dir,
                    executors=executors,
                    work_dir=work_dir,
                    ready=readiness is not None,
                    storage=storage,
                    degraded=degraded_line(readiness),
                )
            )
            await stop.wait()
        console.print("stopping…")
    finally:
        # The signal handlers stay installed: a second Ctrl-C must not interrupt the
        # shutdown half-way and leave children behind.
        refusal.cancel()
        await supervisor.stop()
        await reporter.close()
        if embedded is not None:
            await embedded.stop()
        state_file.unlink(missing_ok=True)
        console.print("stopped.")
    if supervisor.refused_by is not None:
        name = supervisor.refused_by
        log_file = logs / (name + ".log")
        reason = refusal_reason(log_file) or f"see {log_file}"
        raise ConfigError(f"{name} refused its configuration: {reason}")


def refusal_reason(log_file: Path) -> str | None:
    """The message a service logged when it refused its configuration (``run_main``), from
    the end of its log: so `up` says which key or tool module, not only where to look."""
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[-200:]):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = record.get("msg") if isinstance(record, dict) else None
        if isinstance(message, str) and "invalid configuration: " in message:
            return message.split("invalid configuration: ", 1)[1]
    return None
