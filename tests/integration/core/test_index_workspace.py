"""Trace index and workspace KV helpers against a real nats-server."""

from __future__ import annotations

import pytest
from longhaul.core.connection import Connection
from longhaul.core.index import TraceIndex
from longhaul.core.kv import get_entry
from longhaul.core.workspace import INLINE_LIMIT, WorkspaceConflict, WorkspaceStore
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from nats.aio.msg import Msg


def folded(trace_id: str, seq: int, status_done: bool = False) -> TraceState:
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id=trace_id, messages=[ev.InputMessage(role="user", content="x")]
        ),
        seq,
    )
    if status_done:
        state.apply(ev.Completed(aggregate_id=trace_id, summary="ok"), seq + 1)
    return state


async def test_index_never_moves_back(conn: Connection) -> None:
    index = TraceIndex(conn)
    newer = folded("t_a", 5, status_done=True)
    older = folded("t_a", 3)
    assert await index.update(newer)
    assert not await index.update(older)
    entry = await index.get("t_a")
    assert entry is not None and entry.status == "completed"
    assert [e.trace_id async for e in index.entries()] == ["t_a"]


async def test_index_empty_bucket_lists_nothing(conn: Connection) -> None:
    assert [e async for e in TraceIndex(conn).entries()] == []


async def test_workspace_cas_and_offload(conn: Connection) -> None:
    ws = WorkspaceStore(conn)
    rev = await ws.put("task/t1/phase/p1/output", b"small", expected_revision=0)
    with pytest.raises(WorkspaceConflict):
        await ws.put("task/t1/phase/p1/output", b"other", expected_revision=0)
    rev2 = await ws.put("task/t1/phase/p1/output", b"v2", expected_revision=rev)
    with pytest.raises(WorkspaceConflict):
        await ws.put("task/t1/phase/p1/output", b"stale", expected_revision=rev)
    big = b"y" * (INLINE_LIMIT + 10)
    await ws.put("task/t1/phase/p2/output", big)
    entry = await ws.get("task/t1/phase/p2/output")
    assert entry is not None and entry.value == big
    small = await ws.get("task/t1/phase/p1/output")
    assert small is not None and small.value == b"v2" and small.revision == rev2
    assert await ws.get("task/t1/missing") is None


@pytest.mark.parametrize("key", ["../etc", "a/../b", "", "a b", "a.b"])
async def test_workspace_rejects_bad_keys(conn: Connection, key: str) -> None:
    with pytest.raises(ValueError):
        await WorkspaceStore(conn).put(key, b"x")


async def test_a_kv_key_read_is_its_entry_or_none_once_it_is_gone(conn: Connection) -> None:
    """``get_entry``: the one "get or None" every KV reader uses; an empty value is still an
    entry (a reader that treats it as absent says so), a deleted or purged key is none."""
    kv = await conn.kv(conn.names.workspace)
    assert await get_entry(kv, "never.written") is None
    await kv.put("k.value", b"v")
    await kv.put("k.empty", b"")
    entry = await get_entry(kv, "k.value")
    assert entry is not None and entry.value == b"v"
    empty = await get_entry(kv, "k.empty")
    assert empty is not None and not empty.value
    await kv.delete("k.value")
    await kv.purge("k.empty")
    assert await get_entry(kv, "k.value") is None
    assert await get_entry(kv, "k.empty") is None


async def test_a_running_traces_next_entry_is_written_without_reading_it_first(
    conn: Connection,
) -> None:
    """A turn writes its trace's entry every index_interval_s: the writer's next write goes
    on the revision it wrote (no read); another writer meanwhile, or an erasure's tombstone,
    is still found, and the entry never moves back."""
    reads: list[str] = []

    async def on_read(msg: Msg) -> None:
        reads.append(msg.subject)

    for subject in ("$JS.API.DIRECT.GET.>", "$JS.API.STREAM.MSG.GET.>"):
        await conn.nc.subscribe(subject, cb=on_read)
    await conn.nc.flush()
    index, other = TraceIndex(conn), TraceIndex(conn)  # two executors
    assert await index.update(folded("t_w", 3))
    await conn.nc.flush()
    before = len(reads)
    assert await index.update(folded("t_w", 5))
    await conn.nc.flush()
    assert len(reads) == before  # written on the revision it wrote: not read first

    assert await other.update(folded("t_w", 9, status_done=True))  # another writer, newer
    assert not await index.update(folded("t_w", 7))  # a lost race: read, and not moved back
    entry = await index.get("t_w")
    assert entry is not None and (entry.status, entry.last_event_seq) == ("completed", 10)

    assert await index.update(folded("t_b", 3))
    await index.bury("t_b")
    assert not await index.update(folded("t_b", 5))  # the tombstone outranks it
    assert await index.get("t_b") is None
