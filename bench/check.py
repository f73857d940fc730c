"""``make bench-check``: rerun the quick suites and fail on a ratio more than 20 % worse than
the one kept in ``bench/results/`` (tracked in git).

Only ratios are compared (each measured against its own baseline in the same run), never
times: the machine differs and is shared. The rerun writes to a temporary directory, so the
kept figures change only when ``make bench`` is run and its results committed.

    python -m bench.check
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR

TOLERANCE = 1.20
"""A rerun's ratio may be up to 20 % worse than the kept one."""


@dataclass(frozen=True)
class Checked:
    """One ratio column of one suite's table; lower is better."""

    suite: str
    """The module under ``bench/`` that writes the table (run with ``--quick``)."""
    table: str
    """The table's JSON file name in ``bench/results/``."""
    column: str


CHECKED = (
    Checked("bench_executor", "executor__durable_cost_per_step.json", "x appends"),
    Checked("bench_executor", "executor__durable_cost_per_step.json", "x 100-step"),
)


def ratios(table: dict[str, Any], column: str) -> dict[str, float]:
    """The column's figure per row, keyed by the row's first cell."""
    index = table["columns"].index(column)
    return {str(row[0]): float(row[index]) for row in table["rows"]}


def regressions(kept: dict[str, Any], rerun: dict[str, Any], column: str) -> list[str]:
    """Rows of ``column`` whose rerun ratio is more than :data:`TOLERANCE` times the kept one.
    Rows only one side has (a full run kept, a quick one rerun) are left out, but a check with
    no row in common fails: one that measures nothing must not pass."""
    before, after = ratios(kept, column), ratios(rerun, column)
    common = [row for row in before if row in after]
    if not common:
        return [f"{column}: no row in common with the kept figures"]
    return [
        f"{column} [{row}]: {after[row]:g} against {before[row]:g} kept (> {TOLERANCE:g}x)"
        for row in common
        if after[row] > before[row] * TOLERANCE
    ]


def main() -> int:
    root = Path(__file__).parent.parent
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="lh-bench-check-") as tmp:
        env = {**os.environ, "BENCH_RESULTS_DIR": tmp}
        for suite in dict.fromkeys(c.suite for c in CHECKED):
            command = [sys.executable, "-m", f"bench.{suite}", "--quick"]
            if subprocess.run(command, cwd=root, env=env, check=False).returncode != 0:
                failures.append(f"{suite} failed")
        for checked in CHECKED:
            kept_path, rerun_path = RESULTS_DIR / checked.table, Path(tmp) / checked.table
            if not kept_path.exists():
                failures.append(f"{checked.table}: no kept figures (run make bench, commit)")
                continue
            if not rerun_path.exists():
                failures.append(f"{checked.table}: the rerun wrote nothing")
                continue
            kept, rerun = json.loads(kept_path.read_text()), json.loads(rerun_path.read_text())
            failures += regressions(kept, rerun, checked.column)
    for failure in failures:
        print(f"bench-check: {failure}")
    if not failures:
        print(f"bench-check: every checked ratio within {TOLERANCE:g}x of the kept one")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
