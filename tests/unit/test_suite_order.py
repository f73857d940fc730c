"""The suite's own queue: the heaviest files first, and the per-file report that checks it."""

from __future__ import annotations

from pathlib import Path

from tests.slow import HEAVIEST_FILES, heaviest_first
from tests.support.durations import file_totals, makespan, suite_order

ROOT = Path(__file__).resolve().parents[2]


def test_every_listed_heavy_file_exists_once() -> None:
    assert len(set(HEAVIEST_FILES)) == len(HEAVIEST_FILES)
    missing = [path for path in HEAVIEST_FILES if not (ROOT / path).is_file()]
    assert not missing, f"tests/slow.py HEAVIEST_FILES names files that are gone: {missing}"


def test_the_listed_files_run_first_in_their_order_and_each_file_stays_whole() -> None:
    heavy, heavier = HEAVIEST_FILES[1], HEAVIEST_FILES[0]
    nodeids = [
        "tests/unit/a.py::test_one",
        f"{heavy}::test_x[1]",
        f"{heavy}::test_x[2]",
        "tests/unit/b.py::test_two",
        f"{heavier}::test_y",
        "tests/unit/a.py::test_three",
    ]
    ordered = [nodeids[i] for i in heaviest_first(nodeids)]
    assert ordered == [
        f"{heavier}::test_y",
        f"{heavy}::test_x[1]",
        f"{heavy}::test_x[2]",
        "tests/unit/a.py::test_one",
        "tests/unit/b.py::test_two",
        "tests/unit/a.py::test_three",
    ]


REPORT = """\
============================= slowest durations ==============================
100.00s call     tests/real_model/test_real_stack.py::test_a[openai]
50.00s call     tests/real_model/test_real_stack.py::test_a[anthropic]
2.50s setup    tests/real_model/test_real_stack.py::test_a[openai]
60.00s call     tests/unit/x.py::test_b
40.00s teardown tests/unit/y.py::test_c
(12 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_the_report_sums_each_files_phases_and_packs_them_onto_the_workers() -> None:
    totals = file_totals(REPORT.splitlines())
    assert totals == {
        "tests/real_model/test_real_stack.py": 152.5,
        "tests/unit/x.py": 60.0,
        "tests/unit/y.py": 40.0,
    }
    order = suite_order(totals)
    assert order[0] == "tests/real_model/test_real_stack.py"
    assert makespan(totals, order, 2) == 152.5
    assert makespan(totals, order, 1) == 252.5
    # the short files first leave the long one alone at the end
    assert makespan(totals, ["tests/unit/x.py", "tests/unit/y.py", order[0]], 2) == 192.5
