"""Executor: durable cost per agent step, and throughput of many concurrent traces.

A step is one model call plus one tool call with every event appended (assistant message,
tool result, and the engine's periodic context reminder). The model answers instantly and the
tool does nothing, so what is measured is the harness: engine, fold, optimistic appends,
leases, index and snapshots. The baseline is the raw cost of the same JetStream appends made
directly, in the same run against the same server: the trace's stored payloads appended one by
one, each awaited, with the headers of longhaul's append rule (``Nats-Msg-Id``, the expected
last subject sequence): the floor of a durable step. Bare ``js.publish`` calls without
headers are shown too. Figures are ratios of medians of interleaved runs.

Results are appended write-behind (the next model request is built while the previous tool
result's append is in flight), so a step waits for about one round trip, not two; what is
left above the floor is the process's CPU per step (engine, fold, encoding, nats-py).

Targets (issue 16): ≤ 1.3x the raw appends at 1,000 and 10,000 steps, flat in history (the
10,000-step figure within 1.5x of the 100-step one). Throughput: 200 concurrent traces on 1
and 2 executor processes.

    python bench/bench_executor.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `bench` and `tests` importable
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from longhaul.agent.tools import Tool, ToolRegistry, tool  # noqa: E402
from longhaul.core import event_loop  # noqa: E402
from longhaul.core.config import AtomicBatches, LonghaulConfig, NatsConfig, StoreConfig  # noqa: E402
from longhaul.core.connection import Connection, connect  # noqa: E402
from longhaul.core.provision import ProvisionSettings  # noqa: E402
from longhaul.core.store import SUBJECT_IN_PROCESS, EventStore  # noqa: E402
from longhaul.domain import events as ev  # noqa: E402
from longhaul.domain.config import LoopDetectionConfig, MiddlewareEntry, PipelineConfig  # noqa: E402
from longhaul.domain.ids import new_id  # noqa: E402
from longhaul.llm.scripted import ScriptedModel  # noqa: E402
from longhaul.llm.types import Model, ModelRequest, ModelResponse, ToolCall, Usage  # noqa: E402
from nats.js.errors import APIError  # noqa: E402

from bench.common import private_nats, report  # noqa: E402
from tests.support.nats import three_nodes  # noqa: E402
from tests.support.stack import ExecutorProcess, InProcessExecutor, create_trace  # noqa: E402

UNLIMITED = 10**9


@tool(read_only=True)
async def noop(n: int) -> str:
    """Do nothing (benchmark tool).

    Args:
        n: the step number.
    """
    return "ok"


@tool(effects="idempotent")
async def noop_effect(n: int) -> str:
    """Do nothing, declared with effects: every call goes through the effect ledger (an
    ``effect_started`` append before it acts) (benchmark tool).

    Args:
        n: the step number.
    """
    return "ok"


TOOLS: list[Tool] = [noop, noop_effect]
"""Loaded by executor processes through ``LONGHAUL_EXECUTOR__TOOL_MODULES=bench.bench_executor``."""


def instant_model(steps: int, tool_name: str = "noop") -> Model:
    """Calls ``noop`` ``steps`` times, then answers; O(1) per call (no history scan, usage
    given, call ids given) so the model costs nothing the harness would be blamed for."""
    calls = itertools.count()

    def script(request: ModelRequest) -> ModelResponse:
        n = next(calls)
        usage = Usage(prompt_tokens=10, completion_tokens=5)
        if n >= steps:
            return ModelResponse(content="done", usage=usage)
        call = ToolCall.of(id=f"call_{n}", name=tool_name, arguments=f'{{"n": {n}}}')
        return ModelResponse(tool_calls=[call], usage=usage, finish_reason="tool_calls")

    return ScriptedModel(script, name="scripted:bench")


def bench_config(
    url: str, namespace: str, *, atomic: AtomicBatches = False, replicas: int = 1
) -> LonghaulConfig:
    """Defaults, except what would stop or reshape a 10,000-step run of one tool: the per-tool
    call caps of loop detection, and compaction (it would add model calls of its own);
    ``atomic``: a step's events appended as one atomic batch (``nats.atomic_batches``)."""
    return LonghaulConfig(
        nats=NatsConfig(url=url, namespace=namespace, atomic_batches=atomic, replicas=replicas),
        store=StoreConfig(lease_ttl_s=30),
        pipeline=PipelineConfig(
            max_iterations=UNLIMITED,
            loop_detection=LoopDetectionConfig(tool_freq_warn=UNLIMITED, tool_freq_stop=UNLIMITED),
            middleware=[MiddlewareEntry(name="Summarization", enabled=False)],
        ),
    )


async def completion(conn: Connection, trace_ids: set[str]) -> asyncio.Future[float]:
    """A future resolved (with the time) once every trace in ``trace_ids`` completed: a core
    subscription on the stream's ``completed`` subjects, nothing folded."""
    done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    left = set(trace_ids)

    async def on_msg(msg: object) -> None:
        _, trace_id, _ = conn.names.parse_subject(msg.subject)  # type: ignore[attr-defined]
        left.discard(trace_id)
        if not left and not done.done():
            done.set_result(time.perf_counter())

    await conn.nc.subscribe(conn.names.type_filter("trace", "completed"), cb=on_msg)
    await conn.nc.flush()
    return done


async def timed_trace(
    conn: Connection,
    url: str,
    model: Model,
    *,
    tools: list[Tool] = TOOLS,
    model_name: str = "scripted:bench",
    atomic: AtomicBatches = False,
    replicas: int = 1,
    owner: str | None = None,
) -> tuple[str, float]:
    """Run one trace of ``model`` on an in-process executor: (trace id, seconds from its
    creation to its ``completed`` event); ``owner``: whom a gateway serves it to."""
    namespace = conn.names.namespace
    trace_id = new_id("t")
    done = await completion(conn, {trace_id})
    async with InProcessExecutor(
        url,
        namespace,
        "bench",
        config=bench_config(url, namespace, atomic=atomic, replicas=replicas),
        tools=ToolRegistry(tools),
        resolve_model=lambda _name: model,
    ):
        started = time.perf_counter()
        await create_trace(
            EventStore(conn), "benchmark", trace_id=trace_id, owner=owner, model=model_name
        )
        return trace_id, await asyncio.wait_for(done, timeout=3600) - started


class StepCost(NamedTuple):
    """One trace of the durable bench: its seconds, and the same events' raw appends."""

    durable: float
    appends: float
    """The stored payloads appended one by one, awaited, with the append rule's headers
    (``Nats-Msg-Id``, expected last subject sequence and stream): the floor of the step."""
    bare: float
    """The same payloads as bare ``js.publish`` calls, awaited one by one (no headers)."""
    events: int


async def raw_appends(conn: Connection, encoded: list[tuple[str, bytes]], *, rule: bool) -> float:
    """Seconds to append ``encoded`` to a fresh trace subject, each awaited before the next;
    ``rule``: with the headers every longhaul append carries."""
    raw_id = new_id("t")
    names = conn.names
    seq = 0
    started = time.perf_counter()
    for n, (kind, payload) in enumerate(encoded, start=1):
        subject = names.subject("trace", raw_id, kind)
        if rule:
            headers = {
                "Nats-Msg-Id": f"{raw_id}:{n}",
                "Nats-Expected-Last-Subject-Sequence": str(seq),
                "Nats-Expected-Last-Subject-Sequence-Subject": names.aggregate_filter(
                    "trace", raw_id
                ),
            }
            while True:
                try:
                    ack = await conn.js.publish(
                        subject, payload, stream=names.stream, headers=headers
                    )
                    break
                except APIError as exc:  # a cluster still proposing the previous one: again
                    if exc.err_code != SUBJECT_IN_PROCESS:
                        raise
            seq = ack.seq
        else:
            await conn.js.publish(subject, payload)
    return time.perf_counter() - started


async def durable_step_cost(
    url: str,
    steps: int,
    tool_name: str = "noop",
    *,
    atomic: AtomicBatches = False,
    replicas: int = 1,
) -> StepCost:
    """One trace of ``steps`` steps (``atomic``: with atomic batches; ``replicas``: of the
    event stream), and the raw appends of its events."""
    namespace = f"b{steps}{new_id('r')[-6:].lower()}_"
    conn = await connect(
        NatsConfig(url=url, namespace=namespace, replicas=replicas),
        provision_settings=ProvisionSettings(replicas=replicas),
    )
    store = EventStore(conn)
    try:
        trace_id, durable = await timed_trace(
            conn,
            url,
            instant_model(steps, tool_name),
            atomic=atomic,
            replicas=replicas,
        )
        encoded = [
            (r.event.type, ev.encode(r.event)) async for r in store.replay("trace", trace_id)
        ]
        appends = await raw_appends(conn, encoded, rule=True)
        bare = await raw_appends(conn, encoded, rule=False)
        return StepCost(durable, appends, bare, len(encoded))
    finally:
        await conn.close()


def scripted_file(directory: Path, steps: int) -> str:
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "noop", "arguments": {"n": n}}]} for n in range(steps)
    ]
    turns.append({"content": "done"})
    path = directory / f"steps{steps}.yaml"
    path.write_text(yaml.safe_dump(turns))
    return f"scripted:{path}"


async def throughput(url: str, traces: int, steps: int, processes: int) -> float:
    """Seconds for ``traces`` concurrent traces of ``steps`` steps on ``processes`` executors."""
    namespace = f"tp{processes}_"
    conn = await connect(
        NatsConfig(url=url, namespace=namespace), provision_settings=ProvisionSettings()
    )
    store = EventStore(conn)
    env = {
        "LONGHAUL_EXECUTOR__TOOL_MODULES": "bench.bench_executor",
        "LONGHAUL_EXECUTOR__CONCURRENCY": str(traces),
        "LONGHAUL_STORE__LEASE_TTL_S": "30",
        "LONGHAUL_LOG_LEVEL": os.environ.get("BENCH_LOG", "WARNING"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    with tempfile.TemporaryDirectory(prefix="lh-bench-exec-") as tmp:
        model = scripted_file(Path(tmp), steps)
        procs = [
            ExecutorProcess(url, namespace, f"bench-{i}", env=env, log_dir=Path(tmp))
            for i in range(processes)
        ]
        try:
            await asyncio.gather(*(p.start() for p in procs))
            ids = [new_id("t") for _ in range(traces)]
            done = await completion(conn, set(ids))
            started = time.perf_counter()
            await asyncio.gather(*(create_trace(store, "go", trace_id=t, model=model) for t in ids))
            return await asyncio.wait_for(done, timeout=3600) - started
        finally:
            await asyncio.gather(*(p.stop() for p in procs))
            await conn.close()


async def replicated_step_cost(steps: int) -> None:
    """A step on three replicas (what a deployment that must survive a node runs): with the
    default ``auto`` a step's events are one atomic batch; against the same trace appended one
    by one, and the raw one-by-one appends of its events, interleaved in one run."""
    with (
        tempfile.TemporaryDirectory(prefix="lh-bench-cluster-") as tmp,
        three_nodes(Path(tmp)) as nodes,
    ):
        urls = ",".join(node.url for node in nodes)
        modes: dict[str, AtomicBatches] = {"atomic batches (auto)": "auto", "one by one": False}
        runs: dict[str, list[StepCost]] = {label: [] for label in modes}
        for _ in range(3):
            for label, atomic in modes.items():
                runs[label].append(await durable_step_cost(urls, steps, atomic=atomic, replicas=3))
    rows = []
    for label, costs in runs.items():
        durable = statistics.median(run.durable for run in costs)
        appends = statistics.median(run.appends for run in costs)
        rows.append(
            [
                f"{steps} steps, 3 replicas, {label} ({costs[0].events} events)",
                round(appends / steps * 1000, 3),
                round(durable / steps * 1000, 3),
                round(durable / appends, 2),
            ]
        )
    report(
        "executor: a step on three replicas",
        ["trace", "raw appends ms/step", "executor ms/step", "x appends"],
        rows,
        [
            "three nats-server processes clustered on loopback, the event stream on 3 replicas",
            "raw appends: the trace's stored events appended one by one, awaited, with the "
            "append rule's headers; target <= 0.6x with atomic batches (issue 46)",
            "medians of 3 interleaved runs",
        ],
    )


async def main(quick: bool) -> None:
    sizes = [100, 1000] if quick else [100, 1000, 10_000]
    traces, steps = (50, 5) if quick else (200, 5)
    with private_nats() as url:
        await durable_step_cost(url, 50)  # warm-up: imports, first connections, JIT-free caches
        rows = []
        per_step: dict[int, float] = {}
        for size in sizes:
            # Short runs are noisy on a shared machine: interleave a few, compare the medians.
            runs = [await durable_step_cost(url, size) for _ in range(9 if size <= 1000 else 3)]
            durable = statistics.median(run.durable for run in runs)
            appends = statistics.median(run.appends for run in runs)
            bare = statistics.median(run.bare for run in runs)
            per_step[size] = durable / size * 1000
            rows.append(
                [
                    f"{size} steps ({runs[0].events} events)",
                    round(bare / size * 1000, 3),
                    round(appends / size * 1000, 3),
                    round(per_step[size], 3),
                    round(durable / appends, 2),
                    round(durable / bare, 2),
                    round(per_step[size] / per_step[sizes[0]], 2),
                ]
            )
        # The effect ledger's price: the same steps with a tool that declares effects.
        ledger = [await durable_step_cost(url, sizes[-1], "noop_effect") for _ in range(3)]
        durable = statistics.median(run.durable for run in ledger)
        appends = statistics.median(run.appends for run in ledger)
        bare = statistics.median(run.bare for run in ledger)
        rows.append(
            [
                f"{sizes[-1]} steps, a tool with effects ({ledger[0].events} events)",
                round(bare / sizes[-1] * 1000, 3),
                round(appends / sizes[-1] * 1000, 3),
                round(durable / sizes[-1] * 1000, 3),
                round(durable / appends, 2),
                round(durable / bare, 2),
                round(durable / sizes[-1] * 1000 / per_step[sizes[0]], 2),
            ]
        )
        # Atomic batches (nats.atomic_batches): a step's events stored all or none.
        batched = [await durable_step_cost(url, sizes[1], atomic=True) for _ in range(3)]
        durable = statistics.median(run.durable for run in batched)
        appends = statistics.median(run.appends for run in batched)
        bare = statistics.median(run.bare for run in batched)
        rows.append(
            [
                f"{sizes[1]} steps, atomic batches forced on one replica "
                f"({batched[0].events} events)",
                round(bare / sizes[1] * 1000, 3),
                round(appends / sizes[1] * 1000, 3),
                round(durable / sizes[1] * 1000, 3),
                round(durable / appends, 2),
                round(durable / bare, 2),
                round(durable / sizes[1] * 1000 / per_step[sizes[0]], 2),
            ]
        )
        report(
            "executor: durable cost per step",
            [
                "trace",
                "bare js.publish ms/step",
                "raw appends ms/step",
                "executor ms/step",
                "x appends",
                "x bare",
                "x 100-step",
            ],
            rows,
            [
                "step = model call + tool call, every event appended; zero-latency scripted model",
                "raw appends: the trace's stored events appended one by one, awaited, with the "
                "append rule's headers (Msg-Id, expected last subject sequence); bare: no headers",
                "medians of interleaved runs; targets: 10,000-step within 1.5x of 100-step, "
                "<= 1.3x raw appends (issue 16)",
                "a tool with effects: each call's effect_started is appended (and awaited) "
                "before it acts — the effect ledger's price",
                "atomic batches forced on one replica (nats.atomic_batches: true; auto leaves "
                "them off there): nats-server 2.15 stages each batch in a new on-disk store, "
                "several ms a batch (three replicas: the next table)",
            ],
        )
        await replicated_step_cost(sizes[1])
        rates = [(p, await throughput(url, traces, steps, p)) for p in (1, 2)]
        base = traces / rates[0][1]
        tp_rows = [
            [
                f"{p} executor process(es)",
                traces,
                steps,
                round(traces / s, 1),
                round(traces * steps / s, 1),
                round(traces / s / base, 2),
            ]
            for p, s in rates
        ]
        report(
            "executor: concurrent traces",
            ["executors", "traces", "steps each", "traces/s", "steps/s", "x 1 process"],
            tp_rows,
            [
                f"{traces} traces created at once; scripted-file model, no-op tool; "
                "2 CPU cores shared with nats-server and the bench itself"
            ],
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 steps; 50 traces")
    event_loop.run(main(parser.parse_args().quick))
