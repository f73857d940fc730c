"""The supervisor restarts failed children with growing backoff and stops stubborn ones."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from pathlib import Path

from longhaul.cli.supervisor import ChildSpec, Supervisor
from longhaul.core.config import CONFIG_ERROR_EXIT

from tests.integration.cli.harness import alive

STUBBORN = """\
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.environ["READY_FIFO"], "w") as ready:
    ready.write("ready")
while True:
    time.sleep(1)
"""


async def test_failed_child_is_restarted_with_backoff(tmp_path: Path) -> None:
    (tmp_path / "crasher.py").write_text("raise SystemExit(3)\n")
    spawns: list[float] = []
    third = asyncio.Event()

    def spawned() -> None:
        spawns.append(time.monotonic())
        if len(spawns) == 3:
            third.set()

    supervisor = Supervisor(
        [ChildSpec("crasher", "crasher", {"PYTHONPATH": str(tmp_path)})],
        log_dir=tmp_path / "logs",
        on_change=spawned,
    )
    await supervisor.start()
    try:
        async with asyncio.timeout(20):
            await third.wait()
    finally:
        await supervisor.stop()
    gaps = [later - earlier for earlier, later in itertools.pairwise(spawns)]
    assert gaps[0] >= 0.5 and gaps[1] >= 1.0  # 0.5 s, then 1 s, doubling
    assert not alive(supervisor.pids()["crasher"])


async def test_stop_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    env = {"PYTHONPATH": str(tmp_path), "READY_FIFO": str(fifo)}
    supervisor = Supervisor(
        [ChildSpec("stubborn", "stubborn", env)], log_dir=tmp_path / "logs", grace_s=0.5
    )
    await supervisor.start()
    pid = supervisor.pids()["stubborn"]
    async with asyncio.timeout(20):  # SIGTERM only counts once the handler is installed
        assert await asyncio.to_thread(fifo.read_text) == "ready"
    started = time.monotonic()
    async with asyncio.timeout(20):
        await supervisor.stop()
    assert time.monotonic() - started >= 0.5
    assert not alive(pid)


async def test_a_child_refusing_its_configuration_is_not_restarted(tmp_path: Path) -> None:
    (tmp_path / "refuser.py").write_text(f"raise SystemExit({CONFIG_ERROR_EXIT})\n")
    spawns: list[float] = []
    supervisor = Supervisor(
        [ChildSpec("refuser", "refuser", {"PYTHONPATH": str(tmp_path)})],
        log_dir=tmp_path / "logs",
        on_change=lambda: spawns.append(time.monotonic()),
    )
    await supervisor.start()
    try:
        async with asyncio.timeout(20):
            await supervisor.refused.wait()
        # A restart would come 0.5 s after the exit: give it twice that to show up.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), timeout=1.0)
    finally:
        await supervisor.stop()
    assert supervisor.refused_by == "refuser" and len(spawns) == 1
