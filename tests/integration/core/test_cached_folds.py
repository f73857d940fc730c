"""A repository that keeps folds (``cache_size``) shares one fold between its readers: the
gateway's viewer reads ask for the same long trace at once (the trace and its messages), so
loads of one id take turns and each new event is applied once (a real nats-server)."""

from __future__ import annotations

import asyncio

from longhaul.core.repository import traces
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


def answer(sequence: int) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence, parent_sequence=sequence - 1, role="assistant", content=f"#{sequence}"
    )


async def test_concurrent_loads_of_a_cached_fold_apply_each_event_once(
    store: EventStore,
) -> None:
    trace_id = new_id("t")
    repo = traces(store, cache_size=4)
    assert await repo.create(trace_id, CREATED, actor="test") is not None
    cached = await repo.load(trace_id)
    for sequence in range(2, 6):
        await store.append(
            "trace",
            trace_id,
            [answer(sequence)],
            expected=Position(cached.stream_seq + sequence - 2, sequence - 1),
        )
    loads = await asyncio.gather(*(repo.load(trace_id) for _ in range(6)))
    assert all(state is cached for state in loads)
    assert cached.faults == [] and cached.version == 5 and cached.last_sequence == 5
    assert [m.content for m in cached.messages.values()][1:] == ["#2", "#3", "#4", "#5"]
