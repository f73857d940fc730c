"""Run a command (e.g. the project's tests) in the trace's working directory.

The answer is fed on stdin (and its trace id in ``LONGHAUL_TRACE_ID``), the exit code decides,
and stdout+stderr are captured into one log capped at ``output_cap`` bytes
(:mod:`longhaul.verifier.execute`, run by a keeper process that outlives a verifier crash:
:mod:`longhaul.verifier.command_spool`). The command is confined by the same sandbox as
``bash`` (:mod:`longhaul.agent.tools.sandbox`): it sees the system read-only and its working
directory (and ``cwd``) read-write, nothing else; without a sandbox it is refused unless the
operator set ``sandbox.mode: none``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

from longhaul.agent.tools.childproc import child_env
from longhaul.agent.tools.sandbox import Sandbox, SandboxUnavailable, WorkdirFull, rlimits
from longhaul.verifier.command_spool import Job, run_once
from longhaul.verifier.result import CheckResult
from longhaul.verifier.spec import CommandCheck


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
    spool: Path,
    sandbox: Sandbox | None = None,
    confined_to_working_dir: bool = False,
) -> CheckResult:
    """``spool``: the request's own directory, where the command's keeper leaves its result
    (:mod:`longhaul.verifier.command_spool`). ``confined_to_working_dir`` (a trace filed under a
    key): ``cwd`` must lie inside the trace's working directory, the only directory the
    command may see."""
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
        return await _run(
            check, answer, cwd or scratch, working_dir, shown, trace_id, sandbox, spool
        )
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
    spool: Path,
) -> CheckResult:
    # Allow-listed, never the verifier's own environment (it holds the service's secrets).
    env = child_env(Path(cwd or os.getcwd()), {**check.env, "LONGHAUL_TRACE_ID": trace_id})
    try:
        argv = _confined(check, cwd, working_dir, env, sandbox)
        await asyncio.to_thread(sandbox.prepare, [Path(p) for p in (working_dir, cwd) if p])
    except (SandboxUnavailable, WorkdirFull) as exc:
        return CheckResult("command", passed=False, errors=[str(exc)], log=str(exc))
    except OSError as exc:
        message = f"could not start {shown!r} in {cwd or 'the current directory'}: {exc}"
        return CheckResult("command", passed=False, errors=[message], log=message)
    job = Job(
        argv=argv,
        cwd=cwd,
        env=env,
        timeout_s=check.timeout_s,
        output_cap=check.output_cap,
        limits=rlimits(sandbox.config),
    )
    outcome = await run_once(spool, job, answer.encode())
    if outcome.error is not None:
        message = f"{shown!r}: {outcome.error}"
        return CheckResult("command", passed=False, errors=[message], log=message)
    return _result(shown, cwd, outcome.text, outcome.code, outcome.timed_out, check.timeout_s)


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
