"""The verifier's command check runs with an allow-listed environment: no service secret."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.verifier.command_check import run_command
from longhaul.verifier.spec import CommandCheck


async def test_no_service_secret_reaches_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LONGHAUL_API_KEYS", "canary-api-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "canary-provider-key")
    check = CommandCheck(
        command="env", timeout_s=10, output_cap=10_000, cwd=None, env={"MINE": "operator"}
    )
    result = await run_command(
        check, "answer", working_dir=str(tmp_path), trace_id="t1", spool=tmp_path / "spool"
    )
    assert result.passed
    assert "canary" not in result.log
    assert "MINE=operator" in result.log and "LONGHAUL_TRACE_ID=t1" in result.log
