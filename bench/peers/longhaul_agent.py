"""The longhaul side: the executor bench's workload (``bench.bench_executor``: instant
scripted model, one ``noop`` call per step, every event appended durably), one trace per run in
a namespace of its own so the stream and bucket sizes are that run's alone."""

from __future__ import annotations

import time
from dataclasses import dataclass

from longhaul.core import repository
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore
from longhaul.domain.ids import new_id
from nats.js.errors import NotFoundError

from bench.bench_executor import instant_model, timed_trace


@dataclass
class Run:
    seconds: float
    event_bytes: int
    """The namespace's event stream: every event of the trace."""
    snapshot_bytes: int
    """The latest snapshot (KV bucket plus object-store spill), the other thing stored."""
    load_seconds: float
    messages: int


async def _stream_bytes(conn: Connection, stream: str) -> int:
    try:
        return int((await conn.js.stream_info(stream)).state.bytes or 0)
    except NotFoundError:
        return 0


async def run(url: str, steps: int) -> Run:
    namespace = f"p{steps}{new_id('r')[-8:].lower()}_"
    nats = NatsConfig(url=url, namespace=namespace)
    conn = await connect(nats, provision_settings=ProvisionSettings())
    try:
        trace_id, seconds = await timed_trace(conn, url, instant_model(steps))
        names = conn.names
        event_bytes = await _stream_bytes(conn, names.stream)
        snapshot_bytes = await _stream_bytes(conn, f"KV_{names.snapshots}")
        snapshot_bytes += await _stream_bytes(conn, f"OBJ_{names.artifacts}")
    finally:
        await conn.close()
    # Load as a fresh process would: new connection, no cache, snapshot plus catch-up.
    reader = await connect(nats)
    try:
        started = time.perf_counter()
        state = await repository.traces(EventStore(reader)).load(trace_id)
        load_seconds = time.perf_counter() - started
    finally:
        await reader.close()
    return Run(seconds, event_bytes, snapshot_bytes, load_seconds, len(state.messages))
