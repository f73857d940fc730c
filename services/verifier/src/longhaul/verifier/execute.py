"""Run one confined command to its end: answer on stdin, capped output, a hard timeout.

The command runs in its own process group, so a timeout kills everything it started.
Stdout and stderr are captured into one log capped at ``output_cap`` bytes (head and tail are
kept: the end of a test run is where the failures are summarised).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable

from longhaul.verifier.command_spool import Outcome

READ_CHUNK = 64 * 1024
KILL_GRACE_S = 5.0


class CappedOutput:
    """Keeps the first and last ``cap // 2`` bytes of a stream and counts what it dropped."""

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.half:
            excess = len(self.tail) - self.half
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes omitted ...]\n" if self.dropped else ""
        return (
            bytes(self.head).decode(errors="replace")
            + middle
            + bytes(self.tail).decode(errors="replace")
        )


async def execute(
    argv: list[str],
    answer: bytes,
    *,
    cwd: str | None,
    env: dict[str, str],
    timeout_s: float,
    output_cap: int,
    preexec: Callable[[], None],
) -> Outcome:
    """Raises OSError when the command cannot start."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=preexec,
    )
    output = CappedOutput(output_cap)
    feeder = asyncio.create_task(_feed(proc, answer))
    reader = asyncio.create_task(_read(proc, output))
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(reader, proc.wait()), timeout=timeout_s)
    except TimeoutError:
        timed_out = True
        await _kill(proc)
    finally:
        feeder.cancel()
        reader.cancel()
        await asyncio.gather(feeder, reader, return_exceptions=True)
        if proc.returncode is None:
            await _kill(proc)
    return Outcome(text=output.text(), code=proc.returncode, timed_out=timed_out)


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            proc.stdin.write(data)
            await proc.stdin.drain()
        proc.stdin.close()


async def _read(proc: asyncio.subprocess.Process, output: CappedOutput) -> None:
    assert proc.stdout is not None
    while chunk := await proc.stdout.read(READ_CHUNK):
        output.feed(chunk)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S)
