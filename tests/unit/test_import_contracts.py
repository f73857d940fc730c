"""The package boundaries hold: import-linter checks the contracts in pyproject.toml
(``[tool.importlinter]``) — domain is pure, agent and llm never import NATS or core, the client
SDK imports no other longhaul package, libs never import services, services never import each
other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 kept, 0 broken" in result.stdout
