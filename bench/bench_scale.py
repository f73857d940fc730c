"""Many runs at once (issue 16 item 3): memory per active trace, throughput with 1 and 2
executor processes, waiting traces holding no memory, and what the sweeper's cost grows with.

- **Active traces**: 1,000 traces on one executor process, each parked inside a ``hold`` tool
  call (a turn in flight: lease held and renewed, fold and engine in memory) until the bench
  opens a gate (a core NATS message, no polling); the executor's RSS (``/proc``) with all of
  them active against its RSS when idle, per active trace. The gate then lets every trace run
  its remaining steps.
- **Throughput**: the same number of traces of 5 steps created at once, on 1 and 2 executor
  processes (``bench_executor.throughput``).
- **Waiting traces**: batches of traces that call ``ask_human`` (status ``waiting``, lease
  released, turn ended); the executor's RSS after each batch. What a waiting trace costs the
  process is the slope between batches (the first batch also pays one-off growth: imports,
  caches, allocator arenas).
- **Sweeper**: ``Sweeper.sweep_once`` timed against an index of 100 orphaned-looking
  ``running`` entries plus 0 / 1,000 / 10,000 ``completed`` ones, and against 100 / 1,000
  running entries alone: the figure shows which of the two its cost follows.

    python -m bench.bench_scale [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import nats
import yaml
from longhaul.agent.tools import Tool, tool
from longhaul.core import event_loop
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.index import TraceIndex, TraceIndexEntry
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore
from longhaul.domain.ids import new_id
from longhaul.executor.leases import Leases
from longhaul.executor.sweeper import Sweeper

from bench.bench_executor import ROOT, completion, noop, throughput
from bench.common import private_nats, report
from tests.support.stack import ExecutorProcess, create_trace

GATE = "bench.gate"
HELD = "bench.held"
_gate: tuple[asyncio.Event, nats.NATS] | None = None
"""In an executor process: the gate's event and the connection that listens for it."""
_gate_lock = asyncio.Lock()


async def _gate_subscription() -> tuple[asyncio.Event, nats.NATS]:
    """One connection per executor process; the event is set by the bench's gate message."""
    global _gate
    async with _gate_lock:
        if _gate is None:
            event = asyncio.Event()
            nc = await nats.connect(os.environ["LONGHAUL_NATS__URL"])

            async def on_gate(_msg: object) -> None:
                event.set()

            await nc.subscribe(GATE, cb=on_gate)
            await nc.flush()
            _gate = (event, nc)
    return _gate


@tool(read_only=True)
async def hold() -> str:
    """Wait until the bench opens its gate (benchmark tool)."""
    gate, nc = await _gate_subscription()
    await nc.publish(HELD, b"")
    await gate.wait()
    return "ok"


TOOLS: list[Tool] = [hold, noop]
"""Loaded by executor processes through ``LONGHAUL_EXECUTOR__TOOL_MODULES=bench.bench_scale``."""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def script(directory: Path, name: str, turns: list[dict[str, object]]) -> str:
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(turns))
    return f"scripted:{path}"


def env(traces: int) -> dict[str, str]:
    return {
        "LONGHAUL_EXECUTOR__TOOL_MODULES": "bench.bench_scale",
        "LONGHAUL_EXECUTOR__CONCURRENCY": str(traces + 10),
        "LONGHAUL_STORE__LEASE_TTL_S": "30",
        "LONGHAUL_LOG_LEVEL": os.environ.get("BENCH_LOG", "WARNING"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }


@contextlib.asynccontextmanager
async def counter(
    conn: Connection, subject: str, target: int
) -> AsyncIterator[asyncio.Future[None]]:
    """A future resolved once ``target`` messages arrived on ``subject``."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen = 0

    async def on_msg(_msg: object) -> None:
        nonlocal seen
        seen += 1
        if seen >= target and not done.done():
            done.set_result(None)

    sub = await conn.nc.subscribe(subject, cb=on_msg)
    await conn.nc.flush()
    try:
        yield done
    finally:
        await sub.unsubscribe()


async def memory(url: str, traces: int, batches: int) -> tuple[list[list[object]], list[str]]:
    namespace = "mem_"
    conn = await connect(
        NatsConfig(url=url, namespace=namespace), provision_settings=ProvisionSettings()
    )
    store = EventStore(conn)
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="lh-bench-scale-") as tmp:
        directory = Path(tmp)
        steps: list[dict[str, object]] = [
            {"tool_calls": [{"name": "noop", "arguments": {"n": n}}]} for n in range(4)
        ]
        held = script(
            directory,
            "held",
            [{"tool_calls": [{"name": "hold", "arguments": {}}]}, *steps, {"content": "done"}],
        )
        asks = script(
            directory,
            "asks",
            [{"tool_calls": [{"name": "ask_human", "arguments": {"question": "go on?"}}]}],
        )
        quick = script(directory, "warm", [*steps, {"content": "done"}])
        proc = ExecutorProcess(url, namespace, "scale-0", env=env(traces), log_dir=directory)
        await proc.start()
        try:
            assert proc.pid is not None
            # warm-up: imports, connections, caches of a few complete runs
            ids = [new_id("t") for _ in range(20)]
            done = await completion(conn, set(ids))
            await asyncio.gather(*(create_trace(store, "w", trace_id=t, model=quick) for t in ids))
            await asyncio.wait_for(done, timeout=300)
            idle = rss_mb(proc.pid)
            rows.append(["idle (after 20 warm-up runs)", 0, round(idle, 1), "-"])

            ids = [new_id("t") for _ in range(traces)]
            done = await completion(conn, set(ids))
            started = time.perf_counter()
            async with counter(conn, HELD, traces) as all_held:
                await asyncio.gather(
                    *(create_trace(store, "h", trace_id=t, model=held) for t in ids)
                )
                await asyncio.wait_for(all_held, timeout=600)
            to_active = time.perf_counter() - started
            active = rss_mb(proc.pid)
            rows.append(
                [
                    f"{traces} active (in a tool call)",
                    traces,
                    round(active, 1),
                    round((active - idle) * 1024 / traces, 1),
                ]
            )
            started = time.perf_counter()
            await conn.nc.publish(GATE, b"")
            await asyncio.wait_for(done, timeout=1800)
            drained = time.perf_counter() - started
            after = rss_mb(proc.pid)
            rows.append(["all completed", 0, round(after, 1), "-"])

            parked = 0
            batch = traces // 2
            first_parked: float | None = None
            for _ in range(batches):
                ids = [new_id("t") for _ in range(batch)]
                waits = conn.names.type_filter("trace", "waiting")
                async with counter(conn, waits, batch) as waiting:
                    await asyncio.gather(
                        *(create_trace(store, "a", trace_id=t, model=asks) for t in ids)
                    )
                    await asyncio.wait_for(waiting, timeout=600)
                parked += batch
                now = rss_mb(proc.pid)
                per = (
                    "-"
                    if first_parked is None
                    else round((now - first_parked) * 1024 / (parked - batch), 2)
                )
                first_parked = now if first_parked is None else first_parked
                rows.append([f"{parked} waiting (human)", 0, round(now, 1), per])
        finally:
            await proc.stop()
            await conn.close()
    notes = [
        f"{traces} active: all in their tool call {to_active:.1f}s after creation; after the "
        f"gate opened their 4 remaining steps took {drained:.1f}s "
        f"({traces * 4 / drained:.0f} steps/s)",
        "KB/trace: active rows against idle; waiting rows: growth since the first batch "
        "per trace parked after it",
    ]
    return rows, notes


async def sweeper(url: str, sizes: list[tuple[int, int]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for running, completed in sizes:
        namespace = f"sw{running}_{completed}_"
        conn = await connect(
            NatsConfig(url=url, namespace=namespace), provision_settings=ProvisionSettings()
        )
        try:
            kv = await conn.kv(conn.names.traces)
            old = time.time() - 3600
            entries = [
                TraceIndexEntry(trace_id=new_id("t"), status="running", updated_at=old)
                for _ in range(running)
            ] + [
                TraceIndexEntry(trace_id=new_id("t"), status="completed", updated_at=old)
                for _ in range(completed)
            ]
            for start in range(0, len(entries), 500):
                chunk = entries[start : start + 500]
                await asyncio.gather(*(kv.put(e.trace_id, msgspec.json.encode(e)) for e in chunk))
            sweep = Sweeper(
                TraceIndex(conn),
                Leases(conn, "bench-sweeper", 30),
                lambda _t: False,
                interval_s=60,
            )
            times = []
            for _ in range(3):
                started = time.perf_counter()
                await sweep.sweep_once()
                times.append(time.perf_counter() - started)
            ms = statistics.median(times) * 1000
            rows.append([running, completed, round(ms, 1), round(ms / running, 3)])
        finally:
            await conn.close()
    base = rows[0][2]
    for row in rows:
        row.append(round(float(row[2]) / float(base), 1))  # type: ignore[arg-type]
    return rows


async def main(quick: bool) -> None:
    traces = 200 if quick else 1000
    with private_nats() as url:
        rows, notes = await memory(url, traces, batches=3 if quick else 4)
        report(
            "scale: executor memory, active and waiting traces",
            ["state", "active traces", "executor RSS MB", "KB per trace"],
            rows,
            notes,
        )
        rates = [(p, await throughput(url, traces, 5, p)) for p in (1, 2)]
        base = traces / rates[0][1]
        report(
            "scale: concurrent traces on 1 and 2 executor processes",
            ["executors", "traces", "steps each", "traces/s", "steps/s", "x 1 process"],
            [
                [
                    p,
                    traces,
                    5,
                    round(traces / s, 1),
                    round(traces * 5 / s, 1),
                    round(traces / s / base, 2),
                ]
                for p, s in rates
            ],
            [f"{traces} traces created at once; 2 CPU cores shared with nats-server and the bench"],
        )
        sizes = [(100, 0), (100, 1000), (1000, 0)]
        sizes += [] if quick else [(100, 10_000)]
        report(
            "scale: sweeper cost per sweep",
            [
                "running (orphan-looking)",
                "completed",
                "ms per sweep",
                "ms per running",
                "x first row",
            ],
            await sweeper(url, sizes),
            [
                "sweep_once: every index entry is read; running ones older than a lease TTL get "
                "a lease lookup"
            ],
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200 traces; index up to 1,000")
    event_loop.run(main(parser.parse_args().quick))
