"""bash: working directory, exit codes, timeout (the whole process group dies), output cap."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult, ToolSettings
from longhaul.agent.tools.shell import bash

from tests.support import procs
from tests.unit.agent.support import tool_context


async def test_runs_in_the_working_directory_and_reports_exit_code(tmp_path: Path) -> None:
    result = await bash.run(tool_context(tmp_path), {"command": "pwd; echo oops >&2; exit 3"})
    assert isinstance(result, ToolResult)
    assert result.output == f"{tmp_path}\noops\n\n[exit code 3]"
    assert result.error_code == "nonzero_exit"


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    marker = procs.marker()
    command = f"{shlex.join(marker)} & {shlex.join(marker)}"
    call = asyncio.ensure_future(
        bash.run(tool_context(tmp_path), {"command": command, "timeout_s": 5})
    )
    pids = await procs.wait_for_host_pids(marker, 2)
    with pytest.raises(ToolError) as timed_out:
        await call
    assert timed_out.value.code == "timeout"
    assert "killed" in str(timed_out.value)
    assert all(procs.killed(pid) for pid in pids)


async def test_output_is_capped_and_the_rest_counted(tmp_path: Path) -> None:
    settings = ToolSettings(output_cap=1000)
    result = await bash.run(
        tool_context(tmp_path, settings=settings),
        {"command": "head -c 5000 /dev/zero | tr '\\0' a"},
    )
    assert isinstance(result, ToolResult)
    # Head and tail around the true size (no workspace here, so no reference), exit code last.
    assert result.output.startswith("a" * 200 + "\n… [output is 5000 bytes in all; 4600 bytes")
    assert "could not be stored" in result.output
    assert result.output.endswith("] …\n" + "a" * 200 + "\n[exit code 0]")
    assert len(result.output) <= 1000
    # Offloaded: shown once, then only the notice (size, and where the whole is) remains.
    assert result.include_output_only_once
    assert result.long_term_memory is not None
    assert result.long_term_memory.startswith("$ head -c 5000 /dev/zero | tr '\\0' a\n")
    assert "[output is 5000 bytes in all; 4600 bytes omitted" in result.long_term_memory
    assert "a" * 10 not in result.long_term_memory


async def test_an_output_within_the_cap_stays_in_the_history(tmp_path: Path) -> None:
    result = await bash.run(tool_context(tmp_path), {"command": "echo short"})
    assert isinstance(result, ToolResult)
    assert not result.include_output_only_once and result.long_term_memory is None


# An executor stand-in: runs one bash call and is then killed -9 while it runs.
_EXECUTOR = """
import asyncio, sys
from pathlib import Path
from tests.support import procs
from tests.unit.agent.support import tool_context
from longhaul.agent.tools.shell import bash
marker = sys.argv[2]
command = f"sleep {marker} & sleep {marker}; touch finished"
asyncio.run(bash.run(tool_context(Path(sys.argv[1])), {"command": command}))
"""


async def test_the_command_tree_dies_with_its_executor(tmp_path: Path) -> None:
    marker = procs.marker()
    executor = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _EXECUTOR, str(tmp_path), marker[1], cwd=Path(__file__).parents[3]
    )
    pids = await procs.wait_for_host_pids(marker, 2, deadline_s=30)
    executor.kill()
    await executor.wait()
    deadline = time.monotonic() + 10
    while not all(procs.killed(pid) for pid in pids):
        assert time.monotonic() < deadline, "the command outlived its executor"
        await asyncio.sleep(0.05)
    assert not (tmp_path / "finished").exists()


async def test_no_service_secret_reaches_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGHAUL_API_KEYS", "canary-api-key")
    monkeypatch.setenv("OPENAI_API_KEY", "canary-provider-key")
    monkeypatch.setenv("LONGHAUL_NATS__PASSWORD", "canary-nats")
    result = await bash.run(tool_context(tmp_path), {"command": "env; echo HOME=$HOME"})
    assert isinstance(result, ToolResult)
    assert "canary" not in result.output
    assert f"HOME={tmp_path}" in result.output and "PATH=" in result.output
