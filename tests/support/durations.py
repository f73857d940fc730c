"""Per-file totals of a ``pytest --durations=0`` report, and the makespan they give.

``make durations`` runs the suite as ``make test`` does with ``--durations=0`` and pipes the
report here; ``python -m tests.support.durations REPORT [--workers N]`` reads a saved one.
Under ``--dist loadfile`` a file is one unit of work, so the suite's wall time is bounded by
how the files' totals pack onto the workers: this prints each file's total (setup, call and
teardown of its tests), the sum, and the makespan of xdist's queue in the order the suite
runs it (``tests/slow.py``'s ``HEAVIEST_FILES`` first, each file to the first idle worker),
so a file that grew heavy enough to need a place in that list shows up here.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from collections import defaultdict
from collections.abc import Iterable

from tests.slow import HEAVIEST_FILES

LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(?:setup|call|teardown)\s+(\S+?)::")


def file_totals(lines: Iterable[str]) -> dict[str, float]:
    """Seconds per test file, from the report's ``<t>s <phase> <nodeid>`` lines."""
    totals: dict[str, float] = defaultdict(float)
    for line in lines:
        match = LINE.match(line)
        if match:
            totals[match.group(2)] += float(match.group(1))
    return dict(totals)


def suite_order(files: Iterable[str]) -> list[str]:
    """The files in the order the suite queues them: the listed heaviest first, the rest by
    path (collection order)."""
    rank = {path: index for index, path in enumerate(HEAVIEST_FILES)}
    return sorted(files, key=lambda path: (rank.get(path, len(rank)), path))


def makespan(totals: dict[str, float], order: list[str], workers: int) -> float:
    """Each file in ``order`` goes to the worker that is free first."""
    free = [0.0] * workers
    for path in order:
        heapq.heappush(free, heapq.heappop(free) + totals[path])
    return max(free)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", help="a --durations=0 report (default: stdin)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    if args.report:
        with open(args.report, encoding="utf-8", errors="replace") as report:
            totals = file_totals(report)
    else:
        totals = file_totals(sys.stdin)
    if not totals:
        print("no duration lines found: run pytest with --durations=0", file=sys.stderr)
        return 1
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    for path, seconds in ranked[: args.top]:
        listed = "*" if path in HEAVIEST_FILES else " "
        print(f"{seconds:8.1f} s {listed} {path}")
    total = sum(totals.values())
    queued = makespan(totals, suite_order(totals), args.workers)
    best = makespan(totals, [path for path, _ in ranked], args.workers)
    print(f"{total:8.1f} s in {len(totals)} files (* listed in tests/slow.py HEAVIEST_FILES)")
    print(f"{queued:8.1f} s makespan on {args.workers} workers in the suite's order")
    print(f"{best:8.1f} s makespan heaviest first by these totals")
    return 0


if __name__ == "__main__":
    sys.exit(main())
