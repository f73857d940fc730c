"""Event store vs raw JetStream: append throughput/latency and replay rate.

Targets (issue 2): the store adds ≤ 30% over raw ``js.publish``; replay ≥ 50,000 events/s.
Both sides run against the same server in the same run; figures are ratios.
"""

from __future__ import annotations

import argparse
import time

import msgspec
from longhaul.core import event_loop
from longhaul.core.config import NatsConfig
from longhaul.core.connection import connect
from longhaul.core.provision import ProvisionSettings
from longhaul.core.repository import traces
from longhaul.core.snapshots import SnapshotStore, pack_snapshot
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState

from bench.common import percentile, private_nats, report


def message(seq: int) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=seq,
        parent_sequence=seq - 1,
        role="assistant" if seq % 2 else "user",
        content="a typical short step of an agent's conversation " * 3,
    )


async def run(count: int) -> None:
    with private_nats() as url:
        conn = await connect(
            NatsConfig(url=url, namespace="bench_"), provision_settings=ProvisionSettings()
        )
        store = EventStore(conn)
        snapshots = SnapshotStore(conn)
        folds = traces(store, snapshots=snapshots)
        events = [message(i) for i in range(2, count + 2)]

        # raw: the same payloads, plain js.publish, one aggregate subject, awaited one by one
        raw_id = new_id("t")
        payloads = [
            ev.encode(msgspec.structs.replace(e, aggregate_id=raw_id, n=i + 1))
            for i, e in enumerate(events)
        ]
        raw_lat: list[float] = []
        t0 = time.perf_counter()
        for payload in payloads:
            s = time.perf_counter()
            await conn.js.publish(conn.names.subject("trace", raw_id, "message_appended"), payload)
            raw_lat.append(time.perf_counter() - s)
        raw_total = time.perf_counter() - t0

        trace_id = new_id("t")
        [first] = await store.append(
            "trace",
            trace_id,
            [ev.TraceCreated(messages=[ev.InputMessage(role="user", content="go")])],
            expected=Position(),
        )
        position = Position(first.seq, 1)
        lat: list[float] = []
        t0 = time.perf_counter()
        for event in events:
            s = time.perf_counter()
            [rec] = await store.append("trace", trace_id, [event], expected=position)
            lat.append(time.perf_counter() - s)
            position = Position(rec.seq, rec.event.n)
        store_total = time.perf_counter() - t0

        # replay: every event with its sequence; then the fold (load without a snapshot)
        t0 = time.perf_counter()
        replayed = 0
        async for _ in store.replay("trace", trace_id):
            replayed += 1
        events_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        state = TraceState()
        await folds.catch_up(trace_id, state)
        full_s = time.perf_counter() - t0
        snap_state = TraceState()
        cut = int(count * 0.9)
        async for rec in store.replay("trace", trace_id):
            snap_state.apply(rec.event, rec.seq)
            if rec.event.n >= cut:
                break
        await snapshots.write("trace", trace_id, pack_snapshot(snap_state))
        t0 = time.perf_counter()
        loaded = await folds.load(trace_id)
        snap_s = time.perf_counter() - t0
        assert loaded.version == state.version
        await conn.close()

    ratio = store_total / raw_total
    report(
        "store: append and replay",
        ["measure", "raw js.publish", "EventStore", "ratio"],
        [
            ["append throughput (events/s)", count / raw_total, count / store_total, ratio],
            [
                "append p50 latency (ms)",
                percentile(raw_lat, 50) * 1e3,
                percentile(lat, 50) * 1e3,
                percentile(lat, 50) / percentile(raw_lat, 50),
            ],
            [
                "append p99 latency (ms)",
                percentile(raw_lat, 99) * 1e3,
                percentile(lat, 99) * 1e3,
                percentile(lat, 99) / percentile(raw_lat, 99),
            ],
            [f"replay of {replayed} events with sequences (events/s)", "", replayed / events_s, ""],
            [f"full fold of {replayed} events, no snapshot (events/s)", "", replayed / full_s, ""],
            ["snapshot + 10% tail load (s)", "", snap_s, snap_s / full_s],
        ],
        [
            f"store overhead over raw publish: {100 * (ratio - 1):.1f}% (target ≤ 30%)",
            f"replay rate: {replayed / full_s:,.0f} events/s (target ≥ 50,000)",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    event_loop.run(run(2_000 if args.quick else args.events))


if __name__ == "__main__":
    main()
