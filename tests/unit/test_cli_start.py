"""The ``longhaul`` command starts without the MCP SDK: only ``longhaul mcp`` needs it, and it
was a second of every other command's start (the suite runs the command some hundred times)."""

from __future__ import annotations

import subprocess
import sys


def test_the_command_loads_without_the_mcp_sdk() -> None:
    probe = "import sys, longhaul.cli.main; print(sorted(m for m in sys.modules if m == 'mcp'))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
