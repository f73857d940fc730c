"""Planner: scheduling overhead per phase and resume time of a 10-phase task.

- Scheduling overhead: from the moment a dependency's step trace ``completed`` event is
  stored to the moment the dependant's ``trace_created`` is stored (the server's timestamps),
  over chains of phases run by a real executor process with a zero-latency scripted model
  (each step trace is one model call that answers at once).
- Resume: a 10-phase chain whose planner is stopped while phase 7 runs (its agent waits for a
  file in a bash loop, so it stays running); a new planner answers
  ``resume_requested``. Measured: request to ``resumed`` (the decision: checkpoints or log
  read, phases 1-6 skipped) and request to ``task_completed`` (phases 7-10 run), once with
  checkpoints and once with them expired (event log only).

Baseline: one raw JetStream round trip (``js.publish`` awaited) in the same run; figures are
reported as ratios to it. Run: ``python bench/bench_planner.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from longhaul.core import event_loop
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.service import ServiceContext, open_context
from longhaul.core.store import EventStore, Position, Recorded
from longhaul.domain import events as ev
from longhaul.domain.config import ModelsConfig
from longhaul.domain.ids import new_id
from longhaul.domain.state import TaskState
from longhaul.planner.checkpoints import checkpoint_key
from longhaul.planner.main import run as run_planner
from longhaul.planner.service import DURABLE
from nats.js.errors import NotFoundError

from bench.common import median, percentile, private_nats, report
from tests.support.folds import task_state
from tests.support.stack import ExecutorProcess

NAMESPACE = "benchplanner_"


def chain(count: int, scripts: Path, *, hold: int | None = None) -> list[dict[str, object]]:
    """``count`` phases in a row; phase ``hold`` waits for ``release`` in the working dir."""
    phases: list[dict[str, object]] = []
    for n in range(1, count + 1):
        turns: list[dict[str, object]] = [{"content": f"output of phase {n}"}]
        if n == hold:
            command = "while [ ! -f release ]; do sleep 0.01; done"
            turns.insert(0, {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]})
        script = scripts / f"phase-{n}-{hold}.yaml"
        script.write_text(yaml.safe_dump(turns))
        phases.append(
            {
                "id": f"p{n}",
                "name": f"Phase {n}",
                "description": f"step {n}",
                "depends_on": [f"p{n - 1}"] if n > 1 else [],
                "tools": ["bash"] if n == hold else [],
                "model": f"scripted:{script}",
            }
        )
    return phases


async def start_planner(config: LonghaulConfig) -> tuple[ServiceContext, asyncio.Task[None]]:
    ctx = await open_context("planner", config)
    task = asyncio.create_task(run_planner(ctx))
    await until(lambda: pulling(ctx.conn))
    return ctx, task


async def pulling(conn: Connection) -> bool:
    """The planner's durable has a pending pull request: it is ready for work."""
    try:
        info = await conn.js.consumer_info(conn.names.stream, DURABLE)
    except NotFoundError:
        return False
    return bool(info.num_waiting)


async def until(probe: Callable[[], Awaitable[bool]], within: float = 30) -> None:
    """Poll ``probe``: the server publishes nothing when a pull request starts waiting."""
    async with asyncio.timeout(within):
        while not await probe():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def stop_planner(ctx: ServiceContext, task: asyncio.Task[None]) -> None:
    ctx.shutdown.set()
    await asyncio.wait_for(task, 15)
    await ctx.close()


async def create_task(store: EventStore, phases: list[dict[str, object]], workdir: Path) -> str:
    task_id = new_id("task")
    options = {"phases": phases, "working_dir": str(workdir)}
    await store.append(
        "task", task_id, [ev.TaskCreated(goal="bench", options=options)], expected=Position()
    )
    return task_id


async def wait_task(
    store: EventStore, task_id: str, done: Callable[[TaskState], bool]
) -> list[Recorded]:
    state = TaskState()
    seen: list[Recorded] = []
    async with asyncio.timeout(120):
        async for recorded in store.watch("task", task_id):
            state.apply(recorded.event, recorded.seq)
            seen.append(recorded)
            if done(state):
                return seen
    return seen


async def raw_round_trips(conn: Connection, count: int) -> list[float]:
    subject = conn.names.subject("trace", new_id("t"), "message_appended")
    samples = []
    for n in range(count):
        start = time.perf_counter()
        await conn.js.publish(subject, b'{"type":"x","n":%d}' % n)
        samples.append(time.perf_counter() - start)
    return samples


async def stored_at(conn: Connection, seq: int) -> float:
    """When the server stored stream message ``seq`` (its own clock)."""
    message = await conn.js.get_msg(conn.names.stream, seq)
    assert message.time is not None
    return message.time.timestamp()


async def overheads(conn: Connection, store: EventStore, task_id: str) -> list[float]:
    """Per dependant: when its trace_created was stored minus when its dependency's step
    trace completed was stored."""
    task = await task_state(store, task_id)
    created: dict[str, float] = {}
    completed: dict[str, float] = {}
    for pid in task.order:
        trace_id = task.phases[pid].trace_ids[0]
        async for recorded in store.replay("trace", trace_id):
            if isinstance(recorded.event, ev.TraceCreated):
                created[pid] = await stored_at(conn, recorded.seq)
            elif isinstance(recorded.event, ev.Completed):
                completed[pid] = await stored_at(conn, recorded.seq)
    return [
        created[pid] - completed[task.phases[pid].spec.depends_on[0]]
        for pid in task.order
        if task.phases[pid].spec.depends_on
    ]


async def resume_once(
    conn: Connection, store: EventStore, config: LonghaulConfig, workdir: Path, *, expire: bool
) -> tuple[float, float, str]:
    """Stop the planner while phase 7 runs; resume with a new one. Phase 7 stays open until
    the resume was answered, so the answer always comes from the stopped state."""
    release = workdir / "release"
    release.unlink(missing_ok=True)
    ctx, planner = await start_planner(config)
    task_id = await create_task(store, chain(10, workdir, hold=7), workdir)
    await wait_task(store, task_id, lambda t: "p7" in t.running_phases())
    await stop_planner(ctx, planner)
    if expire:
        kv = await conn.kv(conn.names.checkpoints)
        for n in range(1, 11):
            await kv.purge(checkpoint_key(task_id, f"p{n}"))
    ctx, planner = await start_planner(config)
    try:
        task = await task_state(store, task_id)
        [request] = await store.append(
            "task",
            task_id,
            [ev.ResumeRequested()],
            expected=Position(task.stream_seq, task.version),
        )
        answered = await wait_task(store, task_id, lambda t: t.resumes_handled == 1)
        release.touch()
        finished = await wait_task(store, task_id, lambda t: t.status == "completed")
    finally:
        await stop_planner(ctx, planner)
    resumed = answered[-1]
    assert isinstance(resumed.event, ev.Resumed)
    start = await stored_at(conn, request.seq)
    return (
        await stored_at(conn, resumed.seq) - start,
        await stored_at(conn, finished[-1].seq) - start,
        resumed.event.source,
    )


async def run(quick: bool) -> None:
    chains, length, resumes = (2, 6, 1) if quick else (5, 10, 3)
    with private_nats() as url, tempfile.TemporaryDirectory(prefix="lh-bench-") as tmp:
        workdir = Path(tmp)
        nats = NatsConfig(url=url, namespace=NAMESPACE)
        config = LonghaulConfig(nats=nats, models=ModelsConfig(default="scripted:auto"))
        conn = await connect(nats, provision_settings=ProvisionSettings())
        store = EventStore(conn)
        rtt = median(await raw_round_trips(conn, 200))
        executor = ExecutorProcess(
            url, NAMESPACE, "bench", env={"LONGHAUL_EXECUTOR__WORKING_ROOT": str(workdir)}
        )
        async with executor:
            ctx, planner = await start_planner(config)
            samples: list[float] = []
            for _ in range(chains):
                task_id = await create_task(store, chain(length, workdir), workdir)
                await wait_task(store, task_id, lambda t: t.is_final)
                samples += await overheads(conn, store, task_id)
            await stop_planner(ctx, planner)

            decisions: dict[str, list[float]] = {}
            totals: dict[str, list[float]] = {}
            for _ in range(resumes):
                for expire in (False, True):
                    decision, total, source = await resume_once(
                        conn, store, config, workdir, expire=expire
                    )
                    decisions.setdefault(source, []).append(decision)
                    totals.setdefault(source, []).append(total)
        await conn.close()

    ms = 1000
    rows: list[list[object]] = [
        ["raw JetStream round trip (baseline)", 200, rtt * ms, rtt * ms, 1.0],
        [
            "scheduling overhead per phase",
            len(samples),
            median(samples) * ms,
            percentile(samples, 95) * ms,
            median(samples) / rtt,
        ],
    ]
    for source in decisions:
        rows.append(
            [
                f"resume → resumed ({source})",
                len(decisions[source]),
                median(decisions[source]) * ms,
                max(decisions[source]) * ms,
                median(decisions[source]) / rtt,
            ]
        )
        rows.append(
            [
                f"resume → task completed, phases 7-10 ({source})",
                len(totals[source]),
                median(totals[source]) * ms,
                max(totals[source]) * ms,
                median(totals[source]) / rtt,
            ]
        )
    report(
        "planner: scheduling overhead and resume",
        ["measure", "n", "median ms", "p95/max ms", "x raw round trip"],
        rows,
        [
            f"{length}-phase chains run by an executor process, zero-latency scripted model; "
            "resume: 10-phase chain stopped at phase 7"
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    event_loop.run(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
