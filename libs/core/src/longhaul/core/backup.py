"""Back up and restore a whole deployment with JetStream's own stream snapshots.

nats-py has no snapshot API, but JetStream's is plain requests (the protocol the ``nats``
CLI and jsm.go speak): ``$JS.API.STREAM.SNAPSHOT.<stream>`` with a ``deliver_subject`` answers
the stream's config and state, then the server sends the snapshot (a tar, s2-compressed) in
chunks to that subject, each with a reply subject the client answers for flow control, and an
empty message at the end (a ``Status`` header other than 204 is an error).
``$JS.API.STREAM.RESTORE.<stream>`` with the saved config and state answers a subject to send
the chunks to, each as a request; an empty request ends it and is answered with the restored
stream's ``stream_create_response``.

What is saved: every stream of the namespace the server has (the event stream, every KV
bucket, every object store: listed from the server, so a bucket added later is saved too),
plus the agents' working files (``longhaul.core.workfiles``). ``lh_leases`` is saved as its
configuration only: who runs what is the running processes' business, a restored deployment
starts with none and its executors take the traces up.

A backup taken while the services run: each stream's snapshot is consistent in itself, and
the order makes the streams agree with each other. What refers to the log (the index, the
active marks, fold snapshots, schedules, triggers, evals, notification records, experiences)
is saved before it, so everything it names is in the backup; what the log refers to (the
workspace, the object store, task checkpoints) after it, so every file an event names is.
The traces whose events came after the index was saved are re-indexed from the log on restore
(:func:`reindex_after`), so none is missing from listings or from the sweeper.

Every file's size and SHA-256 are in the manifest, written last: a restore checks them all
before it changes anything, and an interrupted backup (no manifest) is refused as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from longhaul.core import repository
from longhaul.core.connection import Connection
from longhaul.core.index import TraceIndex
from longhaul.core.kvscan import current_entries
from longhaul.core.nats_auth import write_private
from longhaul.core.snapshots import SnapshotStore
from longhaul.core.store import EventStore
from longhaul.domain.names import Names
from nats.js import api
from nats.js.errors import NotFoundError

log = logging.getLogger(__name__)

CHUNK_SIZE = 128 * 1024
RESTORE_CHUNK = 64 * 1024
REQUEST_TIMEOUT_S = 10.0
SNAPSHOT_TIMEOUT_S = 600.0
MANIFEST = "backup.json"
FORMAT = 2
"""Format 1 (before the manifest carried checksums) is still read."""
WORKDIR_ARCHIVE = "work.tar"


class BackupError(RuntimeError):
    """JetStream refused a snapshot or a restore (its own words), or a backup is incomplete,
    corrupt or would overwrite something."""


class Progress(Protocol):
    """What a long step reports as it goes (the CLI draws it with rich)."""

    def begin(self, label: str, total: int | None) -> None: ...

    def advance(self, amount: int) -> None: ...

    def end(self, summary: str) -> None: ...


class Silent:
    def begin(self, label: str, total: int | None) -> None:
        pass

    def advance(self, amount: int) -> None:
        pass

    def end(self, summary: str) -> None:
        pass


@dataclass(frozen=True)
class Saved:
    stream: str
    messages: int
    bytes: int
    data: bool = True
    """False: the stream's configuration only (``lh_leases``)."""


@dataclass(frozen=True)
class Plan:
    """The namespace's streams in the order a backup takes them."""

    before_log: list[str]
    log: str
    after_log: list[str]
    config_only: list[str]

    @property
    def ordered(self) -> list[str]:
        return [*self.before_log, self.log, *self.after_log]


def _is_ours(names: Names, stream: str) -> bool:
    """Whether ``stream`` is one of the namespace's (``KV_<ns>lh_*``, ``OBJ_<ns>lh_*``,
    ``<NS>LH_*``); a longer namespace's (``<ns>lh_x`` + ``lh_…``) is not."""
    bucket = rf"(?:KV|OBJ)_{re.escape(names.namespace)}lh_(?:(?!lh_)[A-Za-z0-9_-])+"
    stream_name = rf"{re.escape(names.namespace.upper())}LH_(?:(?!LH_)[A-Z0-9_-])+"
    return re.fullmatch(f"{bucket}|{stream_name}", stream) is not None


async def server_streams(conn: Connection) -> list[str]:
    """Every stream the server has (any namespace's), page by page: the server answers a
    listing 256 names at a time, and nats-py's ``streams_info`` reads only the first page, so
    on a server shared by many namespaces a stream of ours could go unseen."""
    names: list[str] = []
    while True:
        reply = await conn.nc.request(  # nats-py has no paged listing of names
            "$JS.API.STREAM.NAMES",
            json.dumps({"offset": len(names)}).encode(),
            timeout=conn.request_timeout_s,
        )
        page = json.loads(reply.data)
        names.extend(page.get("streams") or [])
        if not page.get("streams") or len(names) >= page.get("total", 0):
            return names


async def plan(conn: Connection) -> Plan:
    names = conn.names
    ours = sorted(s for s in await server_streams(conn) if _is_ours(names, s))
    if names.stream not in ours:
        raise BackupError(
            f"the server has no stream {names.stream}: nothing of namespace "
            f"{names.namespace!r} to back up (is LONGHAUL_NATS__NAMESPACE right?)"
        )
    after = {f"KV_{names.workspace}", f"KV_{names.checkpoints}", f"OBJ_{names.artifacts}"}
    leases = f"KV_{names.leases}"
    return Plan(
        before_log=[s for s in ours if s not in after and s not in (names.stream, leases)],
        log=names.stream,
        after_log=[s for s in ours if s in after],
        config_only=[s for s in ours if s == leases],
    )


def _answer(data: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(data or b"{}")
    error = answer.get("error")
    if error:
        raise BackupError(f"{error.get('description', error)} (err {error.get('err_code')})")
    return answer


def _private(path: Path) -> Any:
    """``path`` opened for writing, readable by its owner only (it holds secrets)."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


def file_entry(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


async def snapshot(
    conn: Connection, stream: str, directory: Path, progress: Progress | None = None
) -> Saved:
    """Save ``stream`` as ``<directory>/<stream>.tar.s2`` with ``<stream>.json`` (its config
    and state)."""
    progress = progress or Silent()
    nc = conn.nc
    inbox = nc.new_inbox()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    data = _private(directory / f"{stream}.tar.s2")

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
        progress.advance(len(msg.data))
        if msg.reply:
            await msg.respond(b"")  # flow control: the server waits for it

    progress.begin(stream, None)
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
    saved = Saved(stream, int(state.get("messages", 0)), int(state.get("bytes", 0)))
    progress.end(f"{stream}: {saved.messages} messages")
    return saved


async def save_config(conn: Connection, stream: str, directory: Path) -> Saved:
    """Save only ``stream``'s configuration (``<stream>.json``): it is recreated empty."""
    reply = await conn.nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", REQUEST_TIMEOUT_S)
    info = _answer(reply.data)
    write_private(directory / f"{stream}.json", json.dumps({"config": info["config"]}, indent=1))
    return Saved(stream, 0, 0, data=False)


async def restore(
    conn: Connection, stream: str, directory: Path, progress: Progress | None = None
) -> Saved:
    """Recreate ``stream`` from its saved snapshot (JetStream refuses one that exists)."""
    progress = progress or Silent()
    nc = conn.nc
    meta = json.loads((directory / f"{stream}.json").read_text())
    reply = await nc.request(
        f"$JS.API.STREAM.RESTORE.{stream}",
        json.dumps({"config": meta["config"], "state": meta["state"]}).encode(),
        REQUEST_TIMEOUT_S,
    )
    target = _answer(reply.data)["deliver_subject"]
    path = directory / f"{stream}.tar.s2"
    progress.begin(stream, path.stat().st_size)
    with path.open("rb") as data:
        while chunk := data.read(RESTORE_CHUNK):
            _answer((await nc.request(target, chunk, REQUEST_TIMEOUT_S)).data)
            progress.advance(len(chunk))
    final = _answer((await nc.request(target, b"", SNAPSHOT_TIMEOUT_S)).data)
    state = final.get("state", {})
    saved = Saved(stream, int(state.get("messages", 0)), int(state.get("bytes", 0)))
    progress.end(f"{stream}: {saved.messages} messages")
    return saved


async def create_empty(conn: Connection, stream: str, directory: Path) -> Saved:
    config = json.loads((directory / f"{stream}.json").read_text())["config"]
    reply = await conn.nc.request(
        f"$JS.API.STREAM.CREATE.{stream}", json.dumps(config).encode(), REQUEST_TIMEOUT_S
    )
    _answer(reply.data)
    return Saved(stream, 0, 0, data=False)


async def _last_seq(conn: Connection) -> int:
    info = await conn.js.stream_info(conn.names.stream)
    return int(info.state.last_seq)


async def back_up(
    conn: Connection,
    directory: Path,
    *,
    progress: Progress | None = None,
    extra: Callable[[], dict[str, Any]] | None = None,
) -> tuple[list[Saved], dict[str, Any]]:
    """Snapshot every stream of the namespace into ``directory`` (which must be new or
    empty); ``extra`` runs after the streams (the working files) and its entries join the
    manifest, which is written last. Returns what was saved and the manifest."""
    progress = progress or Silent()
    await asyncio.to_thread(_new_directory, directory)
    order = await plan(conn)
    started = time.time()
    log_seq_before = await _last_seq(conn)
    saved: list[Saved] = []
    streams: list[dict[str, Any]] = []
    for stream in [*order.config_only, *order.ordered]:
        if stream in order.config_only:
            one = await save_config(conn, stream, directory)
            files = [f"{stream}.json"]
        else:
            one = await snapshot(conn, stream, directory, progress)
            files = [f"{stream}.tar.s2", f"{stream}.json"]
        saved.append(one)
        streams.append(
            {
                "name": stream,
                "data": stream not in order.config_only,
                "messages": one.messages,
                "files": {f: await asyncio.to_thread(file_entry, directory / f) for f in files},
            }
        )
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "namespace": conn.names.namespace,
        "started_at": started,
        "log_seq_before": log_seq_before,
        "streams": streams,
        **(await asyncio.to_thread(extra) if extra else {}),
        "finished_at": time.time(),
    }
    write_private(directory / MANIFEST, json.dumps(manifest, indent=1))
    return saved, manifest


def _new_directory(directory: Path) -> None:
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise BackupError(f"{directory} is not empty: back up into a new directory")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)


def read_manifest(directory: Path) -> dict[str, Any]:
    """The backup's manifest, its files checked against their recorded size and SHA-256;
    a :class:`BackupError` saying what is missing or damaged."""
    path = directory / MANIFEST
    if not directory.is_dir():
        raise BackupError(f"{directory} is not a directory")
    if not path.exists():
        raise BackupError(
            f"{directory} holds no {MANIFEST}: not a longhaul backup, or one that did not "
            "finish (the manifest is written last)"
        )
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
        streams = [
            s if isinstance(s, dict) else {"name": s, "data": True, "files": None}
            for s in manifest["streams"]
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackupError(f"{path} is damaged: {exc}") from exc
    manifest["streams"] = streams
    problems: list[str] = []
    for stream in streams:
        files = stream.get("files")
        if files is None:  # format 1: names only
            names = [f"{stream['name']}.tar.s2", f"{stream['name']}.json"]
            problems += [f"{f} is missing" for f in names if not (directory / f).exists()]
            continue
        problems += _check_files(directory, files)
    work = manifest.get("workdir")
    if work:
        problems += _check_files(directory, {WORKDIR_ARCHIVE: work})
    if problems:
        raise BackupError(
            f"the backup in {directory} is incomplete or damaged: {'; '.join(problems)}"
        )
    return manifest


def _check_files(directory: Path, files: dict[str, dict[str, Any]]) -> list[str]:
    problems = []
    for name, expected in files.items():
        path = directory / name
        if not path.exists():
            problems.append(f"{name} is missing")
            continue
        found = file_entry(path)
        if found["bytes"] != expected["bytes"]:
            problems.append(
                f"{name} has {found['bytes']} bytes, the backup wrote {expected['bytes']}"
            )
        elif found["sha256"] != expected["sha256"]:
            problems.append(f"{name} does not match its SHA-256")
    return problems


async def running_services(conn: Connection) -> list[str]:
    """What shows the namespace's services at work, in words (empty: none seen): executors'
    presence keys in ``lh_leases`` and pull requests waiting on the event stream's durable
    consumers (every service reads the log through one)."""
    names = conn.names
    seen: list[str] = []
    with contextlib.suppress(NotFoundError):
        kv = await conn.kv(names.leases)
        present = await current_entries(kv, "executor.>")
        seen += [f"executor {e.key.removeprefix('executor.')} is present" for e in present]
    with contextlib.suppress(NotFoundError):
        consumers: list[api.ConsumerInfo] = await conn.js.consumers_info(names.stream)
        seen += [
            f"consumer {c.name} has {c.num_waiting} pull request(s) waiting"
            for c in consumers
            if c.config.durable_name and (c.num_waiting or 0) > 0
        ]
    return seen


async def restore_all(
    conn: Connection,
    directory: Path,
    *,
    manifest: dict[str, Any] | None = None,
    replace: bool = False,
    force: bool = False,
    progress: Progress | None = None,
    seen_running: Sequence[str] = (),
) -> list[Saved]:
    """Restore every stream a backup holds, checked whole first (``manifest``: as
    :func:`read_manifest` returned it, already checked). With ``replace`` the namespace's
    streams are deleted first, refused while its services run (they would go on writing into
    what is being replaced; ``seen_running``: signs of them the caller found itself) unless
    ``force``."""
    progress = progress or Silent()
    if manifest is None:
        manifest = await asyncio.to_thread(read_manifest, directory)
    if manifest.get("namespace") != conn.names.namespace:
        raise BackupError(
            f"the backup is of namespace {manifest.get('namespace')!r}, "
            f"this deployment's is {conn.names.namespace!r}"
        )
    existing = set(await server_streams(conn))
    streams = manifest["streams"]
    clashing = [s["name"] for s in streams if s["name"] in existing]
    if clashing and not replace:
        raise BackupError(
            f"these streams exist already: {', '.join(clashing)}; restore into an empty "
            "deployment (longhaul up --restore DIR --data-dir NEW), or stop its services "
            "and pass --replace"
        )
    if clashing and not force:
        running = [*seen_running, *await running_services(conn)]
        if running:
            raise BackupError(
                "the deployment's services are running ("
                + "; ".join(running)
                + "): stop them first (they would write into the streams being replaced), "
                "or pass --force"
            )
    for stream in clashing:
        await conn.js.delete_stream(stream)
    saved = []
    for stream in streams:
        if stream.get("data", True):
            saved.append(await restore(conn, stream["name"], directory, progress))
        else:
            saved.append(await create_empty(conn, stream["name"], directory))
    if "log_seq_before" in manifest:
        progress.begin("re-indexing traces written during the backup", None)
        count = await reindex_after(conn, int(manifest["log_seq_before"]))
        progress.end(f"re-indexed {count} trace(s) written during the backup")
    return saved


async def reindex_after(conn: Connection, seq: int) -> int:
    """Bring the index entry (and active mark) of every trace with an event after stream
    sequence ``seq`` up to its log; the number of traces."""
    names = conn.names
    last = await _last_seq(conn)
    if last <= seq:
        return 0
    sub = await conn.js.subscribe(
        f"{names.subject_root}.trace.>",
        stream=names.stream,
        ordered_consumer=True,
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
        config=api.ConsumerConfig(opt_start_seq=seq + 1, headers_only=True),
        pending_msgs_limit=-1,
        pending_bytes_limit=-1,
    )
    traces: set[str] = set()
    try:
        info = await sub.consumer_info()
        # as kvscan's listing: ends at the message that leaves none pending
        if info.num_pending or (info.delivered and info.delivered.consumer_seq):
            async with asyncio.timeout(SNAPSHOT_TIMEOUT_S):
                async for msg in sub.messages:
                    traces.add(names.parse_subject(msg.subject)[1])
                    if msg.metadata.num_pending == 0:
                        break
    finally:
        await sub.unsubscribe()
    folds = repository.traces(EventStore(conn), snapshots=SnapshotStore(conn))
    index = TraceIndex(conn)
    for trace_id in sorted(traces):
        state = await folds.load(trace_id)
        if state.exists:
            await index.update(state)
    return len(traces)
