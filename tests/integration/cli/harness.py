"""Run the real ``longhaul`` command as a subprocess (the test's event loop keeps serving the
in-process gateway meanwhile)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
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


async def longhaul(
    *args: str,
    url: str,
    env: dict[str, str] | None = None,
    deadline_s: float = COMMAND_DEADLINE_S,
    cwd: Path | None = None,
) -> Result:
    process = await asyncio.create_subprocess_exec(
        LONGHAUL,
        "--url",
        url,
        *args,
        env=env or cli_env(),
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(deadline_s):
            stdout, stderr = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return Result(process.returncode, stdout.decode(), stderr.decode())


UP_START_DEADLINE_S = 90.0
UP_STOP_DEADLINE_S = 60.0


@contextlib.asynccontextmanager
async def running_up(
    data_dir: Path,
    env: dict[str, str],
    *,
    executors: int = 1,
    command: str = LONGHAUL,
    args: tuple[str, ...] = (),
    cwd: Path | None = None,
) -> AsyncIterator[str]:
    """``longhaul up`` on free ports until the block ends (then SIGINT, and it must exit 0);
    yields the gateway's URL from its banner. ``command``: another install's ``longhaul``;
    ``args``: more of ``up``'s options; ``cwd``: the folder it starts in."""
    process = await asyncio.create_subprocess_exec(
        command,
        "up",
        "--port",
        "0",
        "--nats-port",
        "0",
        "--data-dir",
        str(data_dir),
        "--executors",
        str(executors),
        *args,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    stderr = asyncio.create_task(process.stderr.read())
    seen: list[str] = []
    try:
        async with asyncio.timeout(UP_START_DEADLINE_S):
            while not any("Ctrl-C stops all" in line for line in seen):
                line = (await process.stdout.readline()).decode()
                assert line, f"up exited early:\n{''.join(seen)}\n{(await stderr).decode()}"
                seen.append(line)
        match = re.search(r"gateway:\s+(http://[\d.]+:\d+)", "".join(seen))
        assert match, "".join(seen)
        yield match.group(1)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(UP_STOP_DEADLINE_S):
            await process.stdout.read()
            code = await process.wait()
            await stderr
    assert code == 0
