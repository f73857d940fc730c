"""The package boundaries hold: import-linter checks the contracts in pyproject.toml
(``[tool.importlinter]``) — domain is pure, agent and llm never import NATS or core, the client
SDK imports no other longhaul package, libs never import services, services never import each
other, services reach the event log only through the repositories (the recorder is core's,
JetStream is touched only by the modules that own a NATS resource besides the log), and the
gateway's routers and protocol servers are adapters over its use cases (only the app imports
them, none imports another, and a use case imports no FastAPI)."""

from __future__ import annotations

import ast
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
    assert "12 kept, 0 broken" in result.stdout


NATS_CONTEXT_MODULES = {
    "longhaul.gateway.runtime": "maps JetStream's errors to 503 and 507",
    "longhaul.gateway.mirror": "follows the lh_traces bucket",
    "longhaul.gateway.schedules.store": "the lh_schedules bucket",
    "longhaul.gateway.routers.health": "readiness: the event stream is there",
    "longhaul.gateway.metrics": "the consumers' lag",
    "longhaul.executor.leases": "the lease bucket",
    "longhaul.executor.circuits": "the circuit breaker bucket (lh_circuits)",
    "longhaul.verifier.ledger": "the verdict ledger bucket",
}
"""The service modules that own a NATS resource other than the log (a bucket, a health or lag
probe) and so may use JetStream; none of them reads or writes events. The log itself has no
such module: the bar is zero."""


def _forbidden(name: str) -> bool:
    parts = name.split(".")
    return parts[:2] == ["nats", "js"] or parts[:3] == ["longhaul", "core", "store"]


def _side_doors(path: Path) -> list[str]:
    """Where ``path`` imports ``nats.js`` or ``longhaul.core.store``, or uses a connection's
    ``.js`` (a raw JetStream call needs no import)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Attribute) and node.attr == "js":
            names = ["nats.js (a connection's .js)"]
        else:
            continue
        found += [f"line {node.lineno}: {name}" for name in names if _forbidden(name)]
    return found


def _service_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(ROOT.glob("services/*/src/longhaul/**/*.py")):
        src = ROOT.joinpath(*path.relative_to(ROOT).parts[:3])
        parts = path.relative_to(src).with_suffix("").parts
        modules[".".join(part for part in parts if part != "__init__")] = path
    return modules


def test_services_reach_the_log_only_through_the_repositories() -> None:
    modules = _service_modules()
    assert set(NATS_CONTEXT_MODULES) <= set(modules), "a context module moved: update the list"
    doors = {
        module: found
        for module, path in modules.items()
        if module not in NATS_CONTEXT_MODULES and (found := _side_doors(path))
    }
    assert doors == {}, "use the repository's named reads and writes (longhaul.core.repository)"
