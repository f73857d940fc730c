"""Big histories: a 10,000-message trace whose tool outputs are 20 KB each (issue 16 item 4).

One trace of 5,000 steps (an instant model asks for ``blob`` each step; ``blob`` returns 20 KB
of incompressible-ish text, base64 of seeded random bytes): 10,000 messages, ~100 MB of tool
output in the log. Reported:

- per-step cost at the end against the start: the model is timed between consecutive calls
  (request building, middleware, model call, appends of the assistant message and the tool
  result), median of the last 200 steps over the median of the first 200, and the messages the
  last request carried;
- resume: the trace's state loaded by a fresh reader (new connection, no cache) from its
  snapshot plus the catch-up, against a full replay of the log in the same run;
- snapshot size (compressed, as stored) against the event stream's bytes.

Summarization is off (as in the executor bench): with it the history would be compacted and
there would be no 10,000-message request to measure.

``--long`` (issue 46 item 2, never in ``make test``): 100,000 steps of the executor bench's
no-op tool, the last 1,000 steps against the first 1,000 (target: within 1.2x), resume from
the snapshot (target: <= 1 s), the stored bytes per step, and what a gateway takes to open
it in the viewer (the trace and the last 200 messages; target: <= 2 s), against the viewer's
open before it paged (the trace and every message).

    python -m bench.bench_history [--quick | --long]     # --quick: 1,000 messages
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import random
import statistics
import time
import tracemalloc
from typing import NamedTuple

import httpx
from longhaul.agent.tools import Tool, tool
from longhaul.core import event_loop, repository
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.snapshots import SnapshotStore
from longhaul.core.store import EventStore
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState
from longhaul.gateway.auth import LOCAL_OWNER
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import Model, ModelRequest, ModelResponse, ToolCall, Usage

from bench.bench_executor import noop, timed_trace
from bench.common import private_nats, report
from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway

OUTPUT_BYTES = 20_000
EDGE = 200
"""Steps compared at each end of the trace."""


@tool(read_only=True)
async def blob(n: int) -> str:
    """Return 20 KB of text (benchmark tool).

    Args:
        n: the step number (seeds the text).
    """
    raw = random.Random(n).randbytes(OUTPUT_BYTES * 3 // 4)
    return base64.b64encode(raw).decode()


TOOLS: list[Tool] = [blob]


class TimedModel:
    """Calls ``blob`` ``steps`` times, then answers; records when each call came and how many
    messages its request carried."""

    def __init__(self, steps: int, tool_name: str) -> None:
        self.steps = steps
        self.tool_name = tool_name
        self.calls = itertools.count()
        self.stamps: list[float] = []
        self.cpu_stamps: list[float] = []
        """The process's CPU time at each call: on a shared machine wall time between calls
        follows the load; the harness's own cost is its CPU."""
        self.last_messages = 0

    def script(self, request: ModelRequest) -> ModelResponse:
        self.stamps.append(time.perf_counter())
        self.cpu_stamps.append(time.process_time())
        self.last_messages = len(request.messages)
        n = next(self.calls)
        usage = Usage(prompt_tokens=10, completion_tokens=5)
        if n >= self.steps:
            return ModelResponse(content="done", usage=usage)
        call = ToolCall.of(id=f"call_{n}", name=self.tool_name, arguments=f'{{"n": {n}}}')
        return ModelResponse(tool_calls=[call], usage=usage, finish_reason="tool_calls")

    def model(self) -> Model:
        return ScriptedModel(self.script, name="scripted:history")


async def stream_bytes(conn: Connection, name: str) -> int:
    return int((await conn.js.stream_info(name)).state.bytes or 0)


class Load(NamedTuple):
    """One fold of the trace as a fresh process would: wall and CPU seconds, messages."""

    seconds: float
    cpu: float
    messages: int


async def load_seconds(nats: NatsConfig, trace_id: str, *, snapshot: bool) -> Load:
    """Fold the trace as a fresh process would (new connection, no cache)."""
    reader = await connect(nats)
    try:
        store = EventStore(reader)
        started, cpu = time.perf_counter(), time.process_time()
        if snapshot:
            state = await repository.traces(store, snapshots=SnapshotStore(reader)).load(trace_id)
        else:
            state = TraceState()
            await repository.traces(store).catch_up(trace_id, state)
        return Load(time.perf_counter() - started, time.process_time() - cpu, len(state.messages))
    finally:
        await reader.close()


VIEWER_PAGE = 200
"""Messages the viewer fetches when it opens a trace (``trace.js``'s ``PAGE``)."""


async def timed_gets(http: httpx.AsyncClient, urls: list[str]) -> tuple[float, float, int]:
    """``urls`` asked at once, as the viewer does: wall and CPU seconds, bytes received."""
    started, cpu = time.perf_counter(), time.process_time()
    responses = await asyncio.gather(*(http.get(url) for url in urls))
    for response in responses:
        response.raise_for_status()
    wall, spent = time.perf_counter() - started, time.process_time() - cpu
    return wall, spent, sum(len(r.content) for r in responses)


async def fold_mb(nats: NatsConfig, trace_id: str) -> float:
    """The memory a loaded fold of the trace holds (what the gateway keeps for it between
    reads): allocations still live after a load from the snapshot, traced by tracemalloc."""
    reader = await connect(nats)
    try:
        tracemalloc.start()
        repo = repository.traces(EventStore(reader), snapshots=SnapshotStore(reader))
        state = await repo.load(trace_id)
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert state.exists
        return held / 1e6
    finally:
        await reader.close()


async def gateway_reads(nats: NatsConfig, trace_id: str) -> list[list[object]]:
    """What a gateway (served by this process, so CPU is the gateway's and the client's)
    takes to open the trace in the viewer: before, the trace and every message with no fold
    kept (``gateway.folds_cached: 0``); now, the trace and the last page of messages, once
    with the fold loaded from its snapshot (the first open) and once with it kept (the next).
    Then one page of 1,000 from the start, and every message, with the fold kept."""
    base = f"/api/traces/{trace_id}"
    before = [base, f"{base}/messages?mode=all"]
    now = [base, f"{base}/messages?mode=all&before={2**53}&limit={VIEWER_PAGE}"]
    asks: list[tuple[str, int, list[str]]] = [
        ("viewer opens, before: trace + every message, no fold kept", 0, before),
        (f"viewer opens: trace + last {VIEWER_PAGE} messages, first open", 8, now),
        (f"viewer opens: trace + last {VIEWER_PAGE} messages, fold kept", 8, now),
        ("GET messages?limit=1000, fold kept", 8, [f"{base}/messages?limit=1000"]),
        ("GET messages?mode=all (every message), fold kept", 8, [f"{base}/messages?mode=all"]),
    ]
    rows: list[list[object]] = []
    gateways: dict[int, tuple[RunningGateway, httpx.AsyncClient]] = {}
    async with contextlib.AsyncExitStack() as stack:
        for label, kept, urls in asks:
            if kept not in gateways:
                config = gateway_config(nats, rate_limit_per_minute=0, folds_cached=kept)
                gateway = await stack.enter_async_context(serve_gateway(config))
                http = await stack.enter_async_context(gateway.client(timeout=600))
                gateways[kept] = (gateway, http)
            wall, spent, size = await timed_gets(gateways[kept][1], urls)
            rows.append(
                [
                    f"{label}: ms, CPU ms, MB",
                    round(wall * 1000),
                    round(spent * 1000),
                    round(size / 1e6, 2),
                ]
            )
    return rows


async def main(quick: bool, long: bool) -> None:
    steps = 100_000 if long else 500 if quick else 5_000
    edge = 1_000 if long else EDGE
    tools, tool_name = ([noop], "noop") if long else (TOOLS, "blob")
    with private_nats() as url:
        namespace = f"hist{new_id('r')[-6:].lower()}_"
        nats = NatsConfig(url=url, namespace=namespace)
        conn = await connect(nats, provision_settings=ProvisionSettings())
        model = TimedModel(steps, tool_name)
        try:
            trace_id, total = await timed_trace(
                conn,
                url,
                model.model(),
                tools=tools,
                model_name="scripted:history",
                owner=LOCAL_OWNER,
            )
            events = await stream_bytes(conn, conn.names.stream)
            snapshot = await stream_bytes(conn, f"KV_{conn.names.snapshots}")
            snapshot += await stream_bytes(conn, f"OBJ_{conn.names.artifacts}")
        finally:
            await conn.close()
        resume = min([await load_seconds(nats, trace_id, snapshot=True) for _ in range(3)])
        replay = min([await load_seconds(nats, trace_id, snapshot=False) for _ in range(3)])
        reads = await gateway_reads(nats, trace_id) if long else []
        if long:
            held = await fold_mb(nats, trace_id)
            reads.append(["a kept fold's memory (tracemalloc), MB", round(held), "-", "-"])

    gaps = [b - a for a, b in itertools.pairwise(model.stamps)]
    first = statistics.median(gaps[:edge]) * 1000
    last = statistics.median(gaps[-edge:]) * 1000
    cpu = model.cpu_stamps
    cpu_first = (cpu[edge] - cpu[0]) / edge * 1000
    cpu_last = (cpu[-1] - cpu[-1 - edge]) / edge * 1000
    report(
        "history: 100,000 steps" if long else "history: a big trace",
        ["figure", "value", "baseline", "x baseline"],
        [
            ["messages in the trace", resume.messages, "-", "-"],
            ["messages in the last request", model.last_messages, "-", "-"],
            ["run, s", round(total, 1), "-", "-"],
            [
                f"ms/step, last {edge} vs first {edge}",
                round(last, 3),
                round(first, 3),
                round(last / first, 2),
            ],
            [
                f"CPU ms/step, last {edge} vs first {edge}",
                round(cpu_last, 3),
                round(cpu_first, 3),
                round(cpu_last / cpu_first, 2),
            ],
            [
                "resume ms (snapshot + catch-up) vs full replay",
                round(resume.seconds * 1000),
                round(replay.seconds * 1000),
                round(resume.seconds / replay.seconds, 2),
            ],
            [
                "resume CPU ms vs full replay",
                round(resume.cpu * 1000),
                round(replay.cpu * 1000),
                round(resume.cpu / replay.cpu, 2),
            ],
            [
                "snapshot MB vs event stream MB",
                round(snapshot / 1e6, 2),
                round(events / 1e6, 2),
                round(snapshot / events, 2),
            ],
            ["stored bytes per step (event stream)", round(events / steps), "-", "-"],
            *reads,
        ],
        [
            f"{steps} steps, "
            + ("a no-op tool" if long else f"one {OUTPUT_BYTES // 1000} KB tool output each")
            + "; summarization off",
            "ms/step = time between consecutive model calls (build + middleware + appends); "
            "CPU ms/step = the process's CPU time over the same steps (wall time follows the "
            "machine's load, CPU the harness's own cost)",
            "resume/replay: a fresh connection, no cache; best of 3 (by wall time); CPU is "
            "the reading process's, the zlib thread included",
            *(
                [
                    "gateway rows: value = ms, baseline = CPU ms, x baseline = MB of the "
                    "responses; requests of one row are sent at once, as the viewer does; "
                    "'no fold kept': each request loads the snapshot and catches up; 'fold "
                    "kept' (gateway.folds_cached): a request catches the kept fold up"
                ]
                if long
                else []
            ),
        ],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1,000 messages")
    parser.add_argument("--long", action="store_true", help="100,000 steps of a no-op tool")
    args = parser.parse_args()
    event_loop.run(main(args.quick, args.long))
