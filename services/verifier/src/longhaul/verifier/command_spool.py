"""A verification request's command runs at most once, even across verifier crashes.

Each request has a spool directory (``<data_dir>/verifier-runs/<key>``). The verifier locks
it (``flock``), writes the job and starts a keeper (:mod:`longhaul.verifier.runner`) in its
own session, handing the locked descriptor over: the lock lives exactly as long as the keeper.
The keeper marks the spool ``started`` before it runs the command and writes ``result.json``
when it ends. A verifier that takes the request over after a crash therefore finds:

- a result: it is reused;
- the lock held: the keeper still runs, its result is waited for;
- ``started`` but no result and no keeper: the keeper was killed mid-command, so the command
  may have had effects; it is not run again and the check fails saying why;
- nothing started: the command never ran, and runs now.

Losing the whole host loses the spool too; a request taken over on another host runs its
command there (the ledger in :mod:`longhaul.verifier.ledger` sees to one runner at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import ClassVar

import msgspec
from longhaul.agent.tools.childproc import child_env

log = logging.getLogger(__name__)

POLL_S = 0.1
WAIT_SLACK_S = 30.0
"""Beyond the command's own timeout, how long a keeper may take to write its result."""
STALE_S = 24 * 3600
LOCK = "lock"
STARTED = "started"
INTERRUPTED = (
    "the verification command was interrupted (its keeper was killed) and is not run a second time"
)


class Job(msgspec.Struct, kw_only=True):
    FILE: ClassVar[str] = "job.json"
    STDIN: ClassVar[str] = "stdin"

    argv: list[str]
    cwd: str | None
    env: dict[str, str]
    timeout_s: float
    output_cap: int
    limits: list[tuple[int, int, int]]
    """``(resource, soft, hard)`` rlimits of the command (the sandbox config's)."""


class Outcome(msgspec.Struct, kw_only=True, omit_defaults=True):
    FILE: ClassVar[str] = "result.json"

    text: str = ""
    code: int | None = None
    timed_out: bool = False
    error: str | None = None
    """The command did not run to an exit code (could not start, keeper lost)."""


def write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)


def spool_for(root: Path, key: str) -> Path:
    return root / re.sub(r"[^A-Za-z0-9._-]", "_", key)


async def run_once(spool: Path, job: Job, answer: bytes) -> Outcome:
    """The outcome of ``job`` in ``spool``: recorded, awaited, or run now (see module doc)."""
    start = await asyncio.to_thread(_prepare, spool, job, answer)
    if isinstance(start, Outcome):
        return start
    if start is None:
        log.info("%s: its command is running under an earlier keeper; waiting", spool.name)
        return await _await_keeper(spool, job.timeout_s + WAIT_SLACK_S)
    lock, errors = start
    try:
        keeper = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "longhaul.verifier.runner",
            str(spool),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=errors,
            env=child_env(spool),
            pass_fds=(lock,),
            start_new_session=True,  # a kill of the verifier's group leaves it running
        )
    finally:
        os.close(lock)  # from here on the keeper alone holds the lock
        os.close(errors)
    await keeper.wait()
    return await asyncio.to_thread(_read_outcome, spool) or Outcome(
        error=f"the verification command's keeper ended with code {keeper.returncode} and no result"
    )


def _prepare(spool: Path, job: Job, answer: bytes) -> Outcome | tuple[int, int] | None:
    """A settled outcome; None while a keeper runs; else the held lock and the keeper's
    stderr, with the job written for a new keeper."""
    spool.mkdir(parents=True, exist_ok=True)
    lock = _try_lock(spool)
    if lock is None:
        return None
    recorded = _read_outcome(spool)
    if recorded is None and (spool / STARTED).exists():
        recorded = Outcome(error=INTERRUPTED)
    if recorded is not None:
        os.close(lock)
        return recorded
    write_atomically(spool / Job.STDIN, answer)
    write_atomically(spool / Job.FILE, msgspec.json.encode(job))
    errors = os.open(spool / "keeper.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return lock, errors


def discard(spool: Path) -> None:
    """Forget a request's spool once its verdict is on the log."""
    shutil.rmtree(spool, ignore_errors=True)


def prune(root: Path, *, older_than_s: float = STALE_S) -> int:
    """Remove spools nobody holds that are older than ``older_than_s``; how many went."""
    removed = 0
    if not root.is_dir():
        return removed
    cutoff = time.time() - older_than_s
    for spool in root.iterdir():
        with contextlib.suppress(OSError):
            if spool.stat().st_mtime > cutoff:
                continue
            lock = _try_lock(spool)
            if lock is None:
                continue
            os.close(lock)
            discard(spool)
            removed += 1
    return removed


def _try_lock(spool: Path) -> int | None:
    """The spool's lock, held, or None when a live keeper holds it."""
    fd = os.open(spool / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _read_outcome(spool: Path) -> Outcome | None:
    try:
        return msgspec.json.decode((spool / Outcome.FILE).read_bytes(), type=Outcome)
    except FileNotFoundError:
        return None
    except msgspec.DecodeError as exc:
        return Outcome(error=f"the verification command's result is unreadable: {exc}")


async def _await_keeper(spool: Path, patience_s: float) -> Outcome:
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        lock = _try_lock(spool)
        if lock is not None:
            os.close(lock)
            return await asyncio.to_thread(_read_outcome, spool) or Outcome(error=INTERRUPTED)
        await asyncio.sleep(POLL_S)
    return Outcome(error=f"the verification command's keeper did not finish in {patience_s:g}s")
