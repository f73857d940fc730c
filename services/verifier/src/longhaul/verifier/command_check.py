"""Run a command (e.g. the project's tests) in the trace's working directory.

The answer is fed on stdin (and its trace id in ``LONGHAUL_TRACE_ID``), the exit code decides,
and stdout+stderr are captured into one log capped at ``output_cap`` bytes (head and tail are
kept: the end of a test run is where the failures are summarised). The command runs in its own
process group so a timeout kills everything it started, confined by the same sandbox as
``bash`` (:mod:`longhaul.agent.tools.sandbox`): it sees the system read-only and its working
directory (and ``cwd``) read-write, nothing else; without a sandbox it is refused unless the
operator set ``sandbox.mode: none``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path

from longhaul.agent.tools.childproc import child_env
from longhaul.agent.tools.sandbox import Sandbox, SandboxUnavailable
from longhaul.verifier.result import CheckResult
from longhaul.verifier.spec import CommandCheck

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


def resolve_cwd(check: CommandCheck, working_dir: str | None) -> str | None:
    """``check.cwd`` relative to the trace's working directory, else that directory."""
    if check.cwd and working_dir and not os.path.isabs(check.cwd):
        return str(Path(working_dir) / check.cwd)
    return check.cwd or working_dir


async def run_command(
    check: CommandCheck,
    answer: str,
    *,
    working_dir: str | None,
    trace_id: str,
    sandbox: Sandbox | None = None,
    confined_to_working_dir: bool = False,
) -> CheckResult:
    """``confined_to_working_dir`` (a trace filed under a key): ``cwd`` must lie inside the
    trace's working directory, the only directory the command may see."""
    sandbox = sandbox or Sandbox()
    cwd = resolve_cwd(check, working_dir)
    shown = check.command if isinstance(check.command, str) else " ".join(check.command)
    if confined_to_working_dir and not _inside(cwd, working_dir):
        message = f"cwd {check.cwd!r} is outside the trace's working directory"
        return CheckResult("command", passed=False, errors=[message], log=message)
    scratch = None
    if cwd is None and sandbox.confined:
        # No directory of its own: an empty scratch one, never the verifier's.
        scratch = tempfile.mkdtemp(prefix="longhaul-check-")
    try:
        return await _run(check, answer, cwd or scratch, working_dir, shown, trace_id, sandbox)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _inside(cwd: str | None, working_dir: str | None) -> bool:
    if cwd is None or working_dir is None:
        return False
    return Path(cwd).resolve().is_relative_to(Path(working_dir).resolve())


async def _run(
    check: CommandCheck,
    answer: str,
    cwd: str | None,
    working_dir: str | None,
    shown: str,
    trace_id: str,
    sandbox: Sandbox,
) -> CheckResult:
    # Allow-listed, never the verifier's own environment (it holds the service's secrets).
    env = child_env(Path(cwd or os.getcwd()), {**check.env, "LONGHAUL_TRACE_ID": trace_id})
    try:
        argv = _confined(check, cwd, working_dir, env, sandbox)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=sandbox.preexec,
        )
    except SandboxUnavailable as exc:
        return CheckResult("command", passed=False, errors=[str(exc)], log=str(exc))
    except OSError as exc:
        message = f"could not start {shown!r} in {cwd or 'the current directory'}: {exc}"
        return CheckResult("command", passed=False, errors=[message], log=message)
    output = CappedOutput(check.output_cap)
    feeder = asyncio.create_task(_feed(proc, answer.encode()))
    reader = asyncio.create_task(_read(proc, output))
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(reader, proc.wait()), timeout=check.timeout_s)
    except TimeoutError:
        timed_out = True
        await _kill(proc)
    finally:
        feeder.cancel()
        reader.cancel()
        await asyncio.gather(feeder, reader, return_exceptions=True)
        if proc.returncode is None:
            await _kill(proc)
    return _result(shown, cwd, output.text(), proc.returncode, timed_out, check.timeout_s)


def _confined(
    check: CommandCheck,
    cwd: str | None,
    working_dir: str | None,
    env: dict[str, str],
    sandbox: Sandbox,
) -> list[str]:
    """The command line, wrapped in the sandbox: the trace's working directory and ``cwd``
    read-write, run in ``cwd``."""
    argv = ["/bin/sh", "-c", check.command] if isinstance(check.command, str) else check.command
    if cwd is None:
        return sandbox.command(argv, working_dir=Path.cwd(), env=env)
    if not os.path.isdir(cwd):
        raise FileNotFoundError(f"no such directory: {cwd!r}")
    home = Path(working_dir) if working_dir and os.path.isdir(working_dir) else Path(cwd)
    return sandbox.command(argv, working_dir=home, cwd=Path(cwd), writable=[Path(cwd)], env=env)


def _result(
    shown: str, cwd: str | None, text: str, code: int | None, timed_out: bool, timeout_s: float
) -> CheckResult:
    header = f"$ {shown}" + (f"   (in {cwd})" if cwd else "")
    if timed_out:
        error = f"command timed out after {timeout_s:g}s"
    elif code != 0:
        error = f"command exited with code {code}"
    else:
        error = ""
    footer = f"[{error}]" if error else "[exit code 0]"
    log = "\n".join(part for part in (header, text.rstrip(), footer) if part)
    return CheckResult("command", passed=not error, errors=[error] if error else [], log=log)


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
