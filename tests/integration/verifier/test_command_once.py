"""A verification command runs at most once per request, even when the verifier dies mid-run.

Real processes throughout: a verifier process starts the command's keeper and is killed -9
while the command runs; a second verifier (this test) takes the request over and must get the
first run's result without starting the command again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
from longhaul.agent.tools.sandbox import rlimits
from longhaul.domain.config import SandboxConfig
from longhaul.verifier.command_spool import INTERRUPTED, Job, run_once

DEADLINE_S = 30.0

# Counts its starts, then waits for the test's go-ahead file: the test decides when it ends.
COMMAND = 'echo start >> runs; while [ ! -f go ]; do sleep 0.05; done; echo "finished $(cat)"'


def job(workdir: Path) -> Job:
    return Job(
        argv=["/bin/sh", "-c", COMMAND],
        cwd=str(workdir),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        timeout_s=60,
        output_cap=10_000,
        limits=rlimits(SandboxConfig()),
    )


def verifier_process(spool: Path, workdir: Path) -> subprocess.Popen[bytes]:
    """A stand-in verifier: starts the request's command through ``run_once`` and waits."""
    script = textwrap.dedent(
        f"""
        import asyncio, msgspec
        from pathlib import Path
        from longhaul.verifier.command_spool import Job, run_once
        job = msgspec.json.decode({msgspec.json.encode(job(workdir))!r}, type=Job)
        asyncio.run(run_once(Path({str(spool)!r}), job, b"answer"))
        """
    )
    return subprocess.Popen([sys.executable, "-c", script])


async def until(condition: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def starts(workdir: Path) -> int:
    runs = workdir / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


async def test_a_verifier_killed_mid_command_leaves_it_running_and_its_result_is_reused(
    tmp_path: Path,
) -> None:
    spool, workdir = tmp_path / "spool", tmp_path / "work"
    workdir.mkdir()
    first = verifier_process(spool, workdir)
    await until(lambda: starts(workdir) == 1, "the command to start")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=DEADLINE_S)

    taking_over = asyncio.create_task(run_once(spool, job(workdir), b"answer"))
    (workdir / "go").touch()
    outcome = await asyncio.wait_for(taking_over, DEADLINE_S)

    assert outcome.error is None and outcome.code == 0
    assert outcome.text.strip() == "finished answer"
    assert starts(workdir) == 1


async def test_a_finished_result_is_reused_without_running_again(tmp_path: Path) -> None:
    spool, workdir = tmp_path / "spool", tmp_path / "work"
    workdir.mkdir()
    (workdir / "go").touch()
    first = await run_once(spool, job(workdir), b"one")
    again = await run_once(spool, job(workdir), b"two")
    assert first.text.strip() == again.text.strip() == "finished one"
    assert starts(workdir) == 1


async def test_a_keeper_killed_mid_command_is_reported_never_rerun(tmp_path: Path) -> None:
    spool, workdir = tmp_path / "spool", tmp_path / "work"
    workdir.mkdir()
    running = asyncio.create_task(run_once(spool, job(workdir), b"answer"))
    await until(lambda: starts(workdir) == 1, "the command to start")
    keeper = next(
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and _cmdline(pid).endswith(f"longhaul.verifier.runner {spool}")
    )
    os.kill(keeper, signal.SIGKILL)
    outcome = await asyncio.wait_for(running, DEADLINE_S)
    assert outcome.error is not None and "keeper ended" in outcome.error

    again = await run_once(spool, job(workdir), b"answer")
    assert again.error == INTERRUPTED
    assert starts(workdir) == 1


async def test_a_job_written_but_never_started_runs(tmp_path: Path) -> None:
    """A verifier that died after writing the job but before its keeper began leaves no
    ``started`` mark: the command never ran, so it runs now, once."""
    spool, workdir = tmp_path / "spool", tmp_path / "work"
    spool.mkdir()
    workdir.mkdir()
    (spool / Job.FILE).write_bytes(msgspec.json.encode(job(workdir)))
    (workdir / "go").touch()
    outcome = await run_once(spool, job(workdir), b"late")
    assert outcome.text.strip() == "finished late"
    assert starts(workdir) == 1


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""
