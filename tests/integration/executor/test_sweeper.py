"""The sweeper: a running trace nobody holds and nothing will wake is found and run."""

from __future__ import annotations

import time
from pathlib import Path

import nats.errors
from longhaul.core.consumer import ensure_consumer
from longhaul.core.index import TraceIndex, TraceIndexEntry
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.executor.leases import Leases
from longhaul.executor.settings import ExecutorSettings
from longhaul.executor.sweeper import Sweeper
from longhaul.executor.wakeups import consumer_spec

from tests.integration.executor.scripts import record_steps
from tests.support.folds import trace_state
from tests.support.stack import InProcessExecutor, wait_for_trace


async def orphan(store: EventStore, model: str, *, age_s: float = 60.0) -> str:
    """A running trace whose last event is ``age_s`` old, indexed, with no lease."""
    trace_id = new_id("t")
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content="resume me")],
        config=ev.TraceConfig(model=model),
        ts=time.time() - age_s,
    )
    await store.append("trace", trace_id, [created], expected=Position())
    await TraceIndex(store.conn).update(await trace_state(store, trace_id))
    return trace_id


async def test_sweep_wakes_only_orphaned_running_traces(store: EventStore, tmp_path: Path) -> None:
    model = record_steps(tmp_path / "s.yaml", 1, tmp_path / "calls.jsonl")
    orphaned = await orphan(store, model)
    held = await orphan(store, model)
    fresh = await orphan(store, model, age_s=0)
    leases = Leases(store.conn, "exec-other", 30)
    assert await leases.acquire(Leases.trace_key(held)) is not None
    woken: list[str] = []

    def wake(trace_id: str) -> bool:
        woken.append(trace_id)
        return True

    sweeper = Sweeper(
        TraceIndex(store.conn), Leases(store.conn, "exec-sweeper", 2), wake, interval_s=1
    )
    assert await sweeper.sweep_once() == [orphaned]
    assert woken == [orphaned]
    assert fresh not in woken  # its wake-up is most likely still on its way


async def test_an_orphaned_trace_is_finished_by_the_sweeper(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "s.yaml", 2, tmp_path / "calls.jsonl")
    trace_id = await orphan(store, model)
    # Swallow its wake-up, as if an executor had taken it and died after acknowledging it.
    settings = ExecutorSettings(id="drain")
    await ensure_consumer(store.conn, consumer_spec(store.conn.names, settings))
    sub = await store.conn.js.pull_subscribe_bind(
        durable=settings.durable, stream=store.conn.names.stream
    )
    try:
        for msg in await sub.fetch(10, timeout=2):
            await msg.ack()
    except nats.errors.TimeoutError:
        pass
    await sub.unsubscribe()
    async with InProcessExecutor(
        nats_url, namespace, settings={"tool_modules": ["tests.integration.executor.tooling"]}
    ) as ex:
        state = await wait_for_trace(store, trace_id)
        swept = ex.executor.metrics.swept._value.get()
        takeovers = ex.executor.metrics.lease_takeovers._value.get()
    assert state.status == "completed", state.error
    assert swept >= 1 and takeovers >= 1


async def finished(store: EventStore) -> str:
    """A trace indexed while it ran, then completed and indexed again."""
    trace_id = new_id("t")
    created = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="done already")])
    await store.append("trace", trace_id, [created], expected=Position())
    state = await trace_state(store, trace_id)
    await TraceIndex(store.conn).update(state)
    await store.append(
        "trace",
        trace_id,
        [ev.Completed(summary="done")],
        expected=Position(state.stream_seq, state.version),
    )
    await TraceIndex(store.conn).update(await trace_state(store, trace_id))
    return trace_id


class CountingIndex(TraceIndex):
    """Counts the entries a sweep reads."""

    reads = 0

    async def get(self, trace_id: str) -> TraceIndexEntry | None:
        self.reads += 1
        return await super().get(trace_id)


def sweeper_of(index: TraceIndex, store: EventStore, woken: list[str]) -> Sweeper:
    def wake(trace_id: str) -> bool:
        woken.append(trace_id)
        return True

    return Sweeper(index, Leases(store.conn, "exec-sweeper", 2), wake, interval_s=1)


async def test_the_index_marks_exactly_the_unfinished_traces(
    store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "s.yaml", 1, tmp_path / "calls.jsonl")
    running = await orphan(store, model)
    done = await finished(store)
    active = await TraceIndex(store.conn).active_ids()
    assert running in active and done not in active


async def test_a_sweep_reads_the_traces_under_way_not_the_whole_history(
    store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "s.yaml", 1, tmp_path / "calls.jsonl")
    for _ in range(20):
        await finished(store)
    orphaned = await orphan(store, model)
    index = CountingIndex(store.conn)
    woken: list[str] = []
    sweeper = sweeper_of(index, store, woken)
    assert await sweeper.sweep_once() == [orphaned]  # the first sweep also backfills
    index.reads = 0
    woken.clear()
    assert await sweeper.sweep_once() == [orphaned]
    assert index.reads == len(await index.active_ids()) < 20


async def test_a_stale_mark_is_healed_and_an_unmarked_old_trace_is_backfilled(
    store: EventStore, tmp_path: Path
) -> None:
    model = record_steps(tmp_path / "s.yaml", 1, tmp_path / "calls.jsonl")
    index = TraceIndex(store.conn)
    done = await finished(store)
    await index.mark_active(done)  # as if the final entry's unmark had been lost
    unmarked = await orphan(store, model)
    await index.unmark_active(unmarked)  # as if indexed before the marks existed
    woken: list[str] = []
    assert await sweeper_of(index, store, woken).sweep_once() == [unmarked]
    active = await index.active_ids()
    assert done not in active and unmarked in active
