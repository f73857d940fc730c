"""``longhaul.core.backup`` on real nats-servers: a backup holds its own namespace's streams
and no other's, and a trace whose events landed after the backup had saved the index is
indexed (and marked active, so the sweeper finds it) once restored."""

from __future__ import annotations

import json
from pathlib import Path

from longhaul.core.backup import MANIFEST, back_up, restore_all, server_streams
from longhaul.core.config import NatsConfig
from longhaul.core.connection import Connection, connect
from longhaul.core.index import TraceIndex
from longhaul.core.nats_server import NatsServer
from longhaul.core.provision import ProvisionSettings
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

from tests.support.folds import trace_state
from tests.support.nats import unique_namespace


async def start_trace(store: EventStore) -> str:
    trace_id = new_id("t")
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content="go")],
        config=ev.TraceConfig(model="scripted:auto"),
        owner="k_backup",
    )
    await store.append("trace", trace_id, [created], expected=Position())
    return trace_id


async def test_a_trace_written_while_the_backup_ran_is_indexed_after_the_restore(
    conn: Connection, nats_url: str, tmp_path: Path
) -> None:
    # another deployment on the same server: none of its streams is ours to save
    other = await connect(
        NatsConfig(url=nats_url, namespace=unique_namespace()),
        provision_settings=ProvisionSettings(),
    )
    await other.close()
    store, index = EventStore(conn), TraceIndex(conn)
    early = await start_trace(store)
    await index.update(await trace_state(store, early))
    seq = (await conn.js.stream_info(conn.names.stream)).state.last_seq
    late = await start_trace(store)  # its index entry is not written yet
    saved = tmp_path / "backup"
    _, manifest = await back_up(conn, saved)
    names = {s["name"] for s in manifest["streams"]}
    ours = {name for name in await server_streams(conn) if conn.names.namespace in name.lower()}
    assert names == ours and len(ours) >= 12
    # as a backup that saved the index before ``late``'s events and the log after them
    manifest["log_seq_before"] = seq
    (saved / MANIFEST).write_text(json.dumps(manifest))

    with NatsServer(tmp_path / "fresh", port=0) as fresh:
        restored = await connect(NatsConfig(url=fresh.url, namespace=conn.names.namespace))
        try:
            await restore_all(restored, saved)
            found = TraceIndex(restored)
            entry = await found.get(late)
            assert entry is not None and entry.status == "running" and entry.owner == "k_backup"
            assert late in await found.active_ids()
            assert (await found.get(early)) is not None
        finally:
            await restored.close()


async def test_every_stream_of_a_crowded_server_is_listed(tmp_path: Path) -> None:
    """The server lists stream names 256 at a time: a backup (and the delete tests' scan) on a
    server shared by many deployments must page, or it misses streams past the first page."""
    with NatsServer(tmp_path / "js", port=0, log_file=tmp_path / "nats.log") as server:
        conn = await connect(NatsConfig(url=server.url, namespace=unique_namespace()))
        try:
            created = {f"CROWD_{n:03d}" for n in range(300)}
            for name in created:
                await conn.js.add_stream(name=name, subjects=[f"crowd.{name}"], storage="memory")
            assert created <= set(await server_streams(conn))
        finally:
            await conn.close()
