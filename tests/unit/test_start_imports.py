"""Processes the suite (and a deployment) starts again and again load without packages only
one path needs: the MCP SDK is for ``longhaul mcp`` alone, trafilatura for ``web_fetch``'s
first page. Each was over a second of CPU at every start of the command or of a service."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("module", "deferred"),
    [
        ("longhaul.cli.main", "mcp"),
        ("longhaul.gateway.main", "trafilatura"),
        ("longhaul.executor.main", "trafilatura"),
    ],
)
def test_a_start_leaves_out_what_one_path_needs(module: str, deferred: str) -> None:
    probe = f"import sys, {module}; print({deferred!r} in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False", (module, deferred)
