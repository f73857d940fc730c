"""bash: working directory, exit codes, timeout (the whole process group dies), output cap."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult, ToolSettings
from longhaul.agent.tools.shell import bash

from tests.unit.agent.support import tool_context


async def test_runs_in_the_working_directory_and_reports_exit_code(tmp_path: Path) -> None:
    result = await bash.run(tool_context(tmp_path), {"command": "pwd; echo oops >&2; exit 3"})
    assert isinstance(result, ToolResult)
    assert result.output == f"{tmp_path}\noops\n\n[exit code 3]"
    assert result.error_code == "nonzero_exit"


def _killed(pid: int) -> bool:
    """Dead, a zombie, or with SIGKILL already pending: no timing involved."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    sigkill = 1 << (signal.SIGKILL - 1)
    pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
    return fields["State"].split()[0] in ("Z", "X") or bool(pending & sigkill)


async def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    command = "sleep 30 & echo $! > child.pid; sleep 30"
    with pytest.raises(ToolError) as timed_out:
        await bash.run(tool_context(tmp_path), {"command": command, "timeout_s": 0.5})
    assert timed_out.value.code == "timeout"
    assert "killed" in str(timed_out.value)
    assert _killed(int((tmp_path / "child.pid").read_text()))


async def test_output_is_capped_and_the_rest_counted(tmp_path: Path) -> None:
    settings = ToolSettings(output_cap=1000)
    result = await bash.run(
        tool_context(tmp_path, settings=settings),
        {"command": "head -c 5000 /dev/zero | tr '\\0' a"},
    )
    assert isinstance(result, ToolResult)
    assert result.output.startswith("a" * 1000 + "\n… output truncated: 4000 more bytes")
    assert result.output.endswith("[exit code 0]")
