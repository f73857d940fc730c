"""The figures kept in bench/results/: tracked, shown in the README as generated from them, and
compared by ``make bench-check``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench import check, readme
from bench.common import RESULTS_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_table_is_the_one_the_kept_figures_give() -> None:
    assert (
        readme.replaced(readme.README.read_text(), readme.render()) == readme.README.read_text()
    ), "README.md's performance table differs from bench/results/: run python -m bench.readme"


def test_the_checked_figures_are_kept_and_tracked() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "bench/results"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for checked in check.CHECKED:
        path = RESULTS_DIR / checked.table
        assert f"bench/results/{checked.table}" in tracked
        table = json.loads(path.read_text())
        assert checked.column in table["columns"]
        assert {"cpus", "memory_gb", "date", "commit"} <= set(table["machine"])


def table(rows: list[tuple[str, float]]) -> dict[str, Any]:
    return {"columns": ["trace", "x appends"], "rows": [list(row) for row in rows]}


def test_a_ratio_more_than_20_percent_worse_fails_the_check() -> None:
    kept = table([("100 steps", 1.0), ("1000 steps", 1.5)])
    assert (
        check.regressions(kept, table([("100 steps", 1.19), ("1000 steps", 1.5)]), "x appends")
        == []
    )
    worse = check.regressions(kept, table([("100 steps", 1.0), ("1000 steps", 1.81)]), "x appends")
    assert len(worse) == 1 and "1000 steps" in worse[0]


def test_a_rerun_with_no_row_in_common_fails_the_check() -> None:
    kept = table([("100 steps", 1.0)])
    assert check.regressions(kept, table([("200 steps", 1.0)]), "x appends")
