"""``longhaul up`` as a subprocess for the chaos scenarios: started on free ports in a data
dir of its own, its children's pids read from ``up.json`` (the only record of a restart)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from longhaul.core.config import NatsConfig
from pydantic import SecretStr

UP_TIMEOUT_S = 90.0


class Up:
    """``longhaul up`` as a subprocess in a data dir of its own."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.process: asyncio.subprocess.Process | None = None

    @property
    def state_file(self) -> Path:
        return self.root / "up.json"

    def state(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state_file.read_text()))
        except (OSError, ValueError):
            return {}

    async def start(self) -> dict[str, Any]:
        longhaul = Path(sys.executable).with_name("longhaul")
        out = os.open(self.root / "up.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self.process = await asyncio.create_subprocess_exec(
                str(longhaul),
                "up",
                "--port",
                "0",
                "--nats-port",
                "0",
                "--executors",
                "2",
                "--data-dir",
                str(self.root),
                env=self.env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        finally:
            os.close(out)
        deadline = time.monotonic() + UP_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as http:
            while time.monotonic() < deadline:  # readiness is only observable by asking
                state = self.state()
                if state.get("gateway"):
                    with contextlib.suppress(httpx.HTTPError):
                        if (await http.get(f"{state['gateway']}/readyz")).status_code == 200:
                            return state
                await asyncio.sleep(0.2)
        await self.stop()  # a stack that never got ready must not outlive its test
        raise RuntimeError(f"longhaul up not ready in {UP_TIMEOUT_S}s; see {self.root}/logs")

    def pid_of(self, target: str) -> int | None:
        state = self.state()
        if target == "nats":
            return state.get("nats_pid")
        return state.get("children", {}).get(target)

    async def stop(self) -> None:
        if self.process is None or self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), timeout=30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            await self.process.wait()


def admin_config(state: dict[str, Any]) -> NatsConfig:
    """Connect to ``longhaul up``'s authenticated NATS as its admin user."""
    credentials = json.loads(Path(state["nats_credentials"]).read_text())
    return NatsConfig(url=state["nats"], user="admin", password=SecretStr(credentials["admin"]))
