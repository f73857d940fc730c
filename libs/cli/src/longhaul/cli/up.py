"""``longhaul up``: embedded JetStream plus every service, supervised, on one machine."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from longhaul.cli.supervisor import ChildSpec, Supervisor
from longhaul.core.config import load_config
from longhaul.core.nats_server import NatsServer

log = logging.getLogger(__name__)


def service_specs(executors: int, host: str, port: int) -> list[ChildSpec]:
    specs = [
        ChildSpec(
            "gateway",
            "longhaul.gateway.main",
            {"LONGHAUL_GATEWAY__HOST": host, "LONGHAUL_GATEWAY__PORT": str(port)},
        ),
        ChildSpec("planner", "longhaul.planner.main"),
        ChildSpec("verifier", "longhaul.verifier.main"),
    ]
    specs += [
        ChildSpec(f"executor-{i}", "longhaul.executor.main", {"LONGHAUL_EXECUTOR_ID": f"exec-{i}"})
        for i in range(1, executors + 1)
    ]
    return specs


async def run_up(
    *,
    host: str,
    port: int,
    data_dir: Path,
    executors: int,
    nats_url: str | None,
    nats_port: int,
    console: Console,
) -> None:
    config = load_config()
    server: NatsServer | None = None
    if nats_url is None:
        server = NatsServer(
            data_dir / "jetstream", port=nats_port, log_file=data_dir / "nats-server.log"
        )
        await server.astart()
        nats_url = server.url
    env = {**os.environ, "LONGHAUL_NATS__URL": nats_url}
    supervisor = Supervisor(service_specs(executors, host, port), base_env=env)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await supervisor.start()
        model_line = f"model: {config.models.default}"
        if config.models.is_offline_default:
            model_line += (
                "  (offline scripted model: set LONGHAUL_MODEL=openai:<model> and "
                "OPENAI_API_KEY, or anthropic:/gemini: with their keys, for a real one)"
            )
        console.print(
            Panel.fit(
                "\n".join(
                    [
                        "[bold]longhaul[/bold] — local development stack",
                        f"gateway:  http://{host}:{port}  (viewer at /, API at /api, "
                        f"docs at /docs)",
                        f"nats:     {nats_url}"
                        + ("  (embedded, data in " + str(data_dir) + ")" if server else ""),
                        f"services: gateway, planner, verifier, {executors} executor(s)",
                        model_line,
                        "Ctrl-C stops everything.",
                    ]
                ),
                title="longhaul up",
            )
        )
        await stop.wait()
        console.print("stopping…")
    finally:
        await supervisor.stop()
        if server is not None:
            await server.astop()
        console.print("stopped.")
