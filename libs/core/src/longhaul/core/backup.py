"""Back up and restore a whole deployment with JetStream's own stream snapshots.

nats-py has no snapshot API, but JetStream's is plain requests (the protocol the ``nats``
CLI and jsm.go speak): ``$JS.API.STREAM.SNAPSHOT.<stream>`` with a ``deliver_subject`` answers
the stream's config and state, then the server sends the snapshot (a tar, s2-compressed) in
chunks to that subject, each with a reply subject the client answers for flow control, and an
empty message at the end (a ``Status`` header other than 204 is an error).
``$JS.API.STREAM.RESTORE.<stream>`` with the saved config and state answers a subject to send
the chunks to, each as a request; an empty request ends it and is answered with the restored
stream's ``stream_create_response``.

Each stream's snapshot is consistent in itself and taken while the services run. What is
saved: the event stream (with the durable consumers' positions), every KV bucket but the
leases (who runs what is the running processes' business: a restored deployment starts with
none, and its executors take the traces up) and the object store. Restored into a
deployment without those streams, a waiting trace waits again and a running one is taken up
by the sweeper as after a crash.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longhaul.core.connection import Connection
from longhaul.core.nats_auth import write_private

log = logging.getLogger(__name__)

CHUNK_SIZE = 128 * 1024
RESTORE_CHUNK = 64 * 1024
REQUEST_TIMEOUT_S = 10.0
SNAPSHOT_TIMEOUT_S = 600.0
MANIFEST = "backup.json"
BUCKETS = ("traces", "active", "snapshots", "checkpoints", "workspace", "experiences", "evals")
"""Every KV bucket but ``leases``."""


class BackupError(RuntimeError):
    """JetStream refused a snapshot or a restore (its own words), or a backup is incomplete."""


@dataclass(frozen=True)
class Saved:
    stream: str
    messages: int
    bytes: int


def streams_of(conn: Connection) -> list[str]:
    names = conn.names
    buckets = [f"KV_{getattr(names, bucket)}" for bucket in BUCKETS]
    return [names.stream, *buckets, f"OBJ_{names.artifacts}"]


def _answer(data: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(data or b"{}")
    error = answer.get("error")
    if error:
        raise BackupError(f"{error.get('description', error)} (err {error.get('err_code')})")
    return answer


async def snapshot(conn: Connection, stream: str, directory: Path) -> Saved:
    """Save ``stream`` as ``<directory>/<stream>.tar.s2`` with ``<stream>.json`` (its config
    and state)."""
    nc = conn.nc
    inbox = nc.new_inbox()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    data = (directory / f"{stream}.tar.s2").open("wb")

    async def on_chunk(msg: Any) -> None:
        if done.done():
            return
        if not msg.data:
            status = (msg.headers or {}).get("Status", "")
            if status and "204" not in status:
                done.set_exception(BackupError(f"{stream}: {status} {msg.headers}"))
            else:
                done.set_result(None)
            return
        data.write(msg.data)
        if msg.reply:
            await msg.respond(b"")  # flow control: the server waits for it

    sub = await nc.subscribe(inbox, cb=on_chunk, pending_msgs_limit=-1, pending_bytes_limit=-1)
    try:
        request = {"deliver_subject": inbox, "no_consumers": False, "chunk_size": CHUNK_SIZE}
        reply = await nc.request(
            f"$JS.API.STREAM.SNAPSHOT.{stream}", json.dumps(request).encode(), REQUEST_TIMEOUT_S
        )
        meta = _answer(reply.data)
        await asyncio.wait_for(done, SNAPSHOT_TIMEOUT_S)
    finally:
        await sub.unsubscribe()
        data.close()
    write_private(directory / f"{stream}.json", json.dumps(meta, indent=1))
    state = meta.get("state", {})
    return Saved(stream, int(state.get("messages", 0)), int(state.get("bytes", 0)))


async def restore(conn: Connection, stream: str, directory: Path) -> Saved:
    """Recreate ``stream`` from its saved snapshot (JetStream refuses one that exists)."""
    nc = conn.nc
    meta = json.loads((directory / f"{stream}.json").read_text())
    reply = await nc.request(
        f"$JS.API.STREAM.RESTORE.{stream}",
        json.dumps({"config": meta["config"], "state": meta["state"]}).encode(),
        REQUEST_TIMEOUT_S,
    )
    target = _answer(reply.data)["deliver_subject"]
    with (directory / f"{stream}.tar.s2").open("rb") as data:
        while chunk := data.read(RESTORE_CHUNK):
            _answer((await nc.request(target, chunk, REQUEST_TIMEOUT_S)).data)
    final = _answer((await nc.request(target, b"", SNAPSHOT_TIMEOUT_S)).data)
    state = final.get("state", {})
    return Saved(stream, int(state.get("messages", 0)), int(state.get("bytes", 0)))


async def back_up(conn: Connection, directory: Path) -> list[Saved]:
    """Snapshot every stream of the deployment into ``directory`` (the event stream last:
    what the buckets refer to is then in it); a manifest names them."""
    await asyncio.to_thread(directory.mkdir, mode=0o700, parents=True, exist_ok=True)
    names = streams_of(conn)
    ordered = [*names[1:], names[0]]
    saved = [await snapshot(conn, stream, directory) for stream in ordered]
    manifest = {"namespace": conn.names.namespace, "streams": [s.stream for s in saved]}
    write_private(directory / MANIFEST, json.dumps(manifest, indent=1))
    return saved


async def restore_all(conn: Connection, directory: Path, *, replace: bool = False) -> list[Saved]:
    """Restore every stream a backup holds. With ``replace`` the deployment's streams are
    deleted first (its services must be stopped: they would recreate them empty)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise BackupError(f"{directory} holds no longhaul backup ({MANIFEST}): {exc}") from exc
    if manifest.get("namespace") != conn.names.namespace:
        raise BackupError(
            f"the backup is of namespace {manifest.get('namespace')!r}, "
            f"this deployment's is {conn.names.namespace!r}"
        )
    existing = set(await _stream_names(conn))
    streams = list(manifest["streams"])
    clashing = [s for s in streams if s in existing]
    if clashing and not replace:
        raise BackupError(
            f"these streams exist already: {', '.join(clashing)}; restore into an empty "
            "deployment, or stop its services and pass --replace"
        )
    for stream in clashing:
        await conn.js.delete_stream(stream)
    return [await restore(conn, stream, directory) for stream in streams]


async def _stream_names(conn: Connection) -> list[str]:
    return [info.config.name or "" for info in await conn.js.streams_info()]
