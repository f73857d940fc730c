"""Peers: longhaul against LangGraph's ``create_react_agent`` with its three checkpointers, on
the same workload, in one run (issue 16 item 1).

Workload: a zero-latency model that asks for one ``noop`` tool call per step, then answers;
100 / 1,000 / 10,000 steps (``--quick``: 100 / 500). Each side makes the same model calls and
tool calls and keeps the same messages per step (longhaul adds its periodic context reminder).
longhaul runs its real executor with every event appended to JetStream; LangGraph checkpoints
every super-step into InMemorySaver, SqliteSaver (a file) or PostgresSaver (a private
PostgreSQL from Debian's packages, see :mod:`bench.peers.postgres`; skipped with the reason
when none can be started). Runs are interleaved (sizes and systems rotate each round) and
repeated; each figure is the median of its runs and a ratio to longhaul's in the same run.

Stored bytes: longhaul's event stream plus its latest snapshot; InMemorySaver's serialized
checkpoints, writes and blobs; the SQLite file after a WAL checkpoint; the saver's relations
(tables, TOAST, indexes) in a database of the run's own. Load: the state of the run read back
by a fresh reader (longhaul: new connection, snapshot plus catch-up; LangGraph:
``graph.get_state``).

LangGraph checkpoints the whole message list at every step, so its per-step time and bytes
grow with the history: a 10,000-step run is made only if its projection from the two smaller
sizes fits ``--peer-budget-s`` and ``--peer-budget-gb``; otherwise the row shows the
projection, marked as such.

    make bench ARGS="peers --quick"       # syncs the `peers` dependency group first
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from longhaul.core import event_loop

from bench.common import console, private_nats, report
from bench.peers import postgres

MISSING = (
    "bench peers needs the `peers` dependency group (LangGraph and its savers): "
    "run `make bench ARGS=peers`, which syncs it, or `uv sync --group peers`"
)


@dataclass
class Result:
    seconds: float
    stored_bytes: int
    load_seconds: float
    messages: int
    projected: bool = False


System = Callable[[int], Awaitable[Result]]


def longhaul_system(url: str) -> System:
    from bench.peers import longhaul_agent

    async def run(steps: int) -> Result:
        r = await longhaul_agent.run(url, steps)
        return Result(r.seconds, r.event_bytes + r.snapshot_bytes, r.load_seconds, r.messages)

    return run


def langgraph_system(saver: object) -> System:
    from bench.peers import langgraph_agent

    assert isinstance(saver, langgraph_agent.Saver)

    async def run(steps: int) -> Result:
        with tempfile.TemporaryDirectory(prefix="lh-bench-lg-") as tmp:
            r = await asyncio.to_thread(langgraph_agent.run, saver, Path(tmp), steps)
        return Result(r.seconds, r.stored_bytes, r.load_seconds, r.messages)

    return run


def project(results: dict[int, list[Result]], steps: int) -> Result:
    """Per-step time, per-step bytes and load time extrapolated linearly in the history
    length from the two largest measured sizes (each grows linearly for a saver that stores
    the whole history at each step)."""
    (a, ra), (b, rb) = sorted(results.items())[-2:]

    def line(fa: float, fb: float) -> float:
        return fb + (fb - fa) / (b - a) * (steps - b)

    per_step = line(med(ra, "seconds") / a, med(rb, "seconds") / b)
    per_step_bytes = line(med(ra, "stored_bytes") / a, med(rb, "stored_bytes") / b)
    load = line(med(ra, "load_seconds"), med(rb, "load_seconds"))
    return Result(per_step * steps, int(per_step_bytes * steps), load, 0, projected=True)


def med(results: list[Result], field: str) -> float:
    return float(statistics.median(getattr(r, field) for r in results))


async def main(quick: bool, budget_s: float, budget_gb: float) -> int:
    try:
        from bench.peers import langgraph_agent
    except ImportError:
        console.print(MISSING)
        return 1
    sizes = [100, 500] if quick else [100, 1000, 10_000]
    repeats = {100: 2, 500: 1} if quick else {100: 3, 1000: 2, 10_000: 1}
    notes: list[str] = []
    with contextlib.ExitStack() as stack, private_nats() as url:
        systems: dict[str, System] = {"longhaul": longhaul_system(url)}
        systems["LG mem"] = langgraph_system(langgraph_agent.MEMORY)
        systems["LG sqlite"] = langgraph_system(langgraph_agent.SQLITE)
        reason = postgres.unavailable()
        if reason is None:
            pg_url = stack.enter_context(postgres.local_postgres())
            systems["LG pg"] = langgraph_system(langgraph_agent.postgres(pg_url))
        else:
            notes.append(f"PostgresSaver skipped: {reason}")
        await systems["longhaul"](20)  # warm-up: imports, first connections
        await systems["LG mem"](20)
        results: dict[str, dict[int, list[Result]]] = {name: {} for name in systems}
        names = list(systems)
        for round_ in range(max(repeats.values())):
            for size in sizes:
                if round_ >= repeats[size]:
                    continue
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for name in order:
                    measured = results[name]
                    if size == sizes[-1] and name != "longhaul" and len(measured) >= 2:
                        guess = project(measured, size)
                        if guess.seconds > budget_s or guess.stored_bytes > budget_gb * 2**30:
                            measured.setdefault(size, [guess])
                            continue
                    console.print(f"[dim]round {round_ + 1}: {name}, {size} steps[/dim]")
                    measured.setdefault(size, []).append(await systems[name](size))
    rows = []
    for size in sizes:
        base = results["longhaul"][size]
        base_step = med(base, "seconds") / size
        base_bytes = med(base, "stored_bytes") / size
        for name in names:
            runs = results[name].get(size)
            if not runs:
                continue
            mark = "*" if runs[0].projected else ""
            per_step = med(runs, "seconds") / size
            per_bytes = med(runs, "stored_bytes") / size
            rows.append(
                [
                    size,
                    name + mark,
                    0 if runs[0].projected else len(runs),
                    round(per_step * 1000, 3),
                    round(per_step / base_step, 1),
                    round(per_bytes / 1000, 1),
                    round(per_bytes / base_bytes, 1),
                    round(med(runs, "load_seconds") * 1000, 1),
                    runs[0].messages or "-",
                ]
            )
    longest = sizes[-1]
    notes += [
        "LG = LangGraph create_react_agent with InMemorySaver (mem) / SqliteSaver / "
        "PostgresSaver (pg); x lh = ratio to longhaul at the same size in this run",
        "step = one model call + one tool call; zero-latency model; medians of interleaved runs; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
        "stored = longhaul: event stream + latest snapshot; LangGraph: what its saver holds",
        f"load = the run's state read back by a fresh reader; the longest run is {longest} steps",
        f"* projected: not run, extrapolated from the smaller sizes because the run would "
        f"exceed --peer-budget-s {budget_s:g} or --peer-budget-gb {budget_gb:g}",
    ]
    report(
        "peers: longhaul vs LangGraph create_react_agent",
        [
            "steps",
            "system",
            "runs",
            "ms/step",
            "x lh",
            "KB/step",
            "x lh KB",
            "load ms",
            "msgs",
        ],
        rows,
        notes,
    )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100 and 500 steps")
    parser.add_argument("--peer-budget-s", type=float, default=900.0)
    parser.add_argument("--peer-budget-gb", type=float, default=4.0)
    args = parser.parse_args()
    sys.exit(event_loop.run(main(args.quick, args.peer_budget_s, args.peer_budget_gb)))
