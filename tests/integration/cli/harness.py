"""Run the real ``longhaul`` command as a subprocess (the test's event loop keeps serving the
in-process gateway meanwhile)."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.env import service_env as base_service_env

LONGHAUL = str(Path(sys.executable).parent / "longhaul")


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def cli_env(**extra: str) -> dict[str, str]:
    """Our environment minus any LONGHAUL_* the developer has set, wide enough not to wrap."""
    env = base_service_env()
    env.update({"COLUMNS": "200", "PYTHONUNBUFFERED": "1"}, **extra)
    return env


def alive(pid: int) -> bool:
    """Whether process ``pid`` still exists (signal 0 probes without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


COMMAND_DEADLINE_S = 60.0


async def longhaul(*args: str, url: str, env: dict[str, str] | None = None) -> Result:
    process = await asyncio.create_subprocess_exec(
        LONGHAUL,
        "--url",
        url,
        *args,
        env=env or cli_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(COMMAND_DEADLINE_S):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Result(process.returncode, stdout.decode(), stderr.decode())
