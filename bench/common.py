"""Shared bench plumbing: a private nats-server, timing helpers, result tables."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from longhaul.core.nats_server import NatsServer
from rich.console import Console
from rich.table import Table

console = Console()
RESULTS_DIR = Path(__file__).parent / "results"


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


def report(name: str, columns: list[str], rows: list[list[Any]], notes: list[str] = ()) -> None:  # type: ignore[assignment]
    """Print a table and keep a JSON copy under bench/results/."""
    table = Table(title=name)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)
    for note in notes:
        console.print(note)
    RESULTS_DIR.mkdir(exist_ok=True)
    slug = "".join(ch if ch.isalnum() else "_" for ch in name.lower()).strip("_")
    out = RESULTS_DIR / f"{slug}.json"
    out.write_text(
        json.dumps(
            {
                "columns": columns,
                "rows": rows,
                "notes": list(notes),
                "machine": os.uname().nodename,
            },
            indent=2,
            default=str,
        )
    )
