"""Shared bench plumbing: a private nats-server, timing helpers, result tables."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from longhaul.core.nats_server import NatsServer
from rich.console import Console
from rich.table import Table

console = Console()
RESULTS_DIR = Path(os.environ.get("BENCH_RESULTS_DIR") or Path(__file__).parent / "results")
"""Tracked in git: each table's latest figures (``make bench-check`` compares a rerun with
them; the README's performance table is generated from them). ``BENCH_RESULTS_DIR`` puts a
run's elsewhere (``bench.check`` does, so a check never overwrites the kept figures)."""


@contextlib.contextmanager
def private_nats() -> Iterator[str]:
    """A throw-away JetStream server for one benchmark run."""
    with (
        tempfile.TemporaryDirectory(prefix="lh-bench-") as tmp,
        NatsServer(Path(tmp) / "js", port=0) as server,
    ):
        yield server.url


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def machine() -> dict[str, Any]:
    """What a figure was measured on: size, load, date and commit."""
    try:
        pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory_gb: float | None = round(pages * page / 2**30, 1)
    except (ValueError, OSError):
        memory_gb = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return {
        "cpus": os.cpu_count(),
        "memory_gb": memory_gb,
        "load_average": round(os.getloadavg()[0], 1),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
    }


def report(name: str, columns: list[str], rows: list[list[Any]], notes: list[str] = ()) -> None:  # type: ignore[assignment]
    """Print a table and keep a JSON copy (figures, notes, :func:`machine`) in
    :data:`RESULTS_DIR`."""
    table = Table(title=name)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)
    for note in notes:
        console.print(note)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    slug = "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_")
    out = RESULTS_DIR / f"{slug}.json"
    out.write_text(
        json.dumps(
            {
                "columns": columns,
                "rows": rows,
                "name": name,
                "notes": list(notes),
                "machine": machine(),
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
