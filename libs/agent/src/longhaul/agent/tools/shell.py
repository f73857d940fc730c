"""``bash``: one shell command in the working directory, with a timeout and an output cap
(beyond it, the whole output is stored and the model sees head, tail and a reference).

The command runs in its own session (process group) so that a timeout kills everything it
started — a ``sleep`` in a pipeline, a background server — not only the shell; the same group
dies when the executor does (see :mod:`childproc`). The child's environment is an allow-list:
no service secret reaches it. It runs confined by :mod:`sandbox` (bubblewrap): read-only system
directories, its working directory, no network unless configured, resource limits; with no
sandbox available it is refused unless the operator set ``sandbox.mode: none``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.childproc import GROUP_GUARD, child_env
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.offload import fit_output
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.tools.sandbox import Sandbox, SandboxUnavailable, WorkdirFull

_CHUNK = 65_536


async def _capture(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    """Keep the first ``cap`` bytes, drain (and count) the rest so the child never blocks."""
    kept = bytearray()
    total = 0
    while chunk := await stream.read(_CHUNK):
        total += len(chunk)
        if len(kept) < cap:
            kept.extend(chunk[: cap - len(kept)])
    return bytes(kept), total


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


# Cut off by a crash: its effects stay in the sandbox, so the model is told and inspects.
@tool(on_unknown="model")
async def bash(ctx: ToolContext, command: str, timeout_s: float | None = None) -> ToolResult:
    """Run a bash command in the working directory; stdout and stderr are merged.

    Args:
        command: the command line (bash syntax).
        timeout_s: seconds before the command and all its children are killed.
    """
    settings = ctx.settings
    timeout = min(timeout_s or settings.bash_timeout_s, settings.bash_max_timeout_s)
    ctx.working_dir.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox(settings.sandbox)
    env = child_env(ctx.working_dir)
    # Unconfined, the guarding shell kills the command's group when the executor dies; in
    # the sandbox the PID namespace does that (it ends with bwrap, which dies with us).
    shell = (
        ["bash", "-c", command]
        if sandbox.confined
        else ["bash", "-c", GROUP_GUARD, "longhaul-bash", command]
    )
    try:
        argv = sandbox.command(shell, working_dir=ctx.working_dir, env=env)
    except SandboxUnavailable as exc:
        raise ToolError(str(exc), code="sandbox_unavailable") from None
    try:
        await asyncio.to_thread(sandbox.prepare, [ctx.working_dir])
    except WorkdirFull as exc:
        raise ToolError(str(exc), code="workdir_full") from None
    async with sandbox.tool_cgroup() as cgroup:
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=ctx.working_dir,
            env=env,
            preexec_fn=sandbox.preexec_in(cgroup),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        assert process.stdout is not None
        reader = asyncio.ensure_future(_capture(process.stdout, settings.capture_max_bytes))
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), timeout)
        except TimeoutError:
            _kill_group(process)
            await process.wait()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            raise ToolError(
                f"command timed out after {timeout:g}s and was killed (with its children)",
                code="timeout",
            ) from None
        except BaseException:
            _kill_group(process)
            reader.cancel()
            raise
        _kill_group(process)  # background children left behind hold the pipe open otherwise
    kept, total = await reader
    # Over the cap: the whole output to the workspace, head and tail (with the true size and
    # where the rest is) to the model, the exit code always last.
    fitted = await fit_output(ctx, kept, total)
    code = process.returncode
    output = fitted.text
    return ToolResult(
        output=f"{output}\n[exit code {code}]" if output else f"[exit code {code}]",
        title=f"$ {command[:80]}",
        error_code=None if code == 0 else "nonzero_exit",
        # an offloaded output is shown once, then only its notice (how to page through it)
        long_term_memory=None
        if fitted.notice is None
        else f"$ {command[:200]}\n(output shown once) {fitted.notice}\n[exit code {code}]",
        include_output_only_once=fitted.notice is not None,
    )
