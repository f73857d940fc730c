"""Snapshots: folds stored beside the log so a load replays only the tail, taken when due,
off the writer's critical path.

Two parts, kept apart as the ``eventsourcing`` library keeps them:

* where snapshots live — :class:`SnapshotStore` (``lh_snapshots`` KV, zlib-compressed msgpack;
  a value too big for the KV goes to the object store behind a pointer) and its in-memory twin
  in :mod:`~longhaul.core.memory`; both speak :class:`SnapshotIO`;
* when one is taken — :class:`Snapshots`: a :class:`~longhaul.core.repository.Repository`
  given one asks it after every applied event (:meth:`Snapshots.after_save`); a snapshot is
  due every ``every`` events while the aggregate is small and every ~1/8 of its length once it
  is long (:func:`snapshot_interval`): re-encoding a 20,000-message state every 200 events
  would make snapshot work quadratic in the log's length, this keeps it linear while a load
  still replays at most a quarter of the log. Snapshots are written by a background task, one
  at a time per aggregate, from the state as encoded when the save was applied
  (:func:`pack_snapshot`): the fold then matches the stream sequence it records, which it need
  not a moment later (write-behind applies an event before its append lands). The owner calls
  :meth:`Snapshots.at_rest` once its appends have landed (a snapshot of the end of a long run
  of saves, so the next load replays nothing) and :meth:`Snapshots.flush` when it is done
  writing (an executor at the end of a turn).

A snapshot is only an optimisation: one that does not read back is ignored (a full replay).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

import msgspec
from longhaul.core.background import drain
from longhaul.core.connection import Connection
from longhaul.core.direct_get import DirectGetError
from longhaul.core.kv import get_entry
from longhaul.domain.events import Aggregate
from longhaul.domain.state import Fold
from longhaul.domain.state.fold import decode_snapshot
from nats.js.errors import ObjectNotFoundError

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Fold)

INLINE_LIMIT = 512 * 1024
"""Larger compressed snapshots go to the object store."""
OFF_LOOP_BYTES = 256 * 1024


class PackedSnapshot(NamedTuple):
    """A fold encoded at one moment, with the position it had then and its shape."""

    data: bytes
    seq: int
    n: int
    schema: int


def pack_snapshot(state: Fold) -> PackedSnapshot:
    """Encode ``state`` now: a snapshot must be taken where the fold matches the log (an event
    whose append is still in flight has moved ``version`` but not ``stream_seq``)."""
    return PackedSnapshot(
        msgspec.msgpack.encode(state), state.stream_seq, state.version, type(state).SCHEMA
    )


class SnapshotIO(Protocol):
    """Where snapshots are read and written."""

    async def read(self, aggregate: Aggregate, aggregate_id: str, fold: type[S]) -> S | None:
        """The stored fold, or None when there is none or it does not read back."""
        ...

    async def write(self, aggregate: Aggregate, aggregate_id: str, packed: PackedSnapshot) -> None:
        """Store a fold encoded earlier (:func:`pack_snapshot`), at the position it had then."""
        ...


class _Stored(msgspec.Struct):
    """KV value of a snapshot: zlib-compressed msgpack of the state, inline or in the object
    store."""

    seq: int
    n: int
    state: bytes = b""
    object_name: str | None = None
    schema: int = 0
    """The fold's ``SCHEMA`` when it was taken (0: before folds had one)."""


class SnapshotStore:
    """Snapshots in JetStream: the ``lh_snapshots`` KV, big ones in the object store."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @staticmethod
    def _key(aggregate: Aggregate, aggregate_id: str) -> str:
        return f"{aggregate}.{aggregate_id}"

    async def read(self, aggregate: Aggregate, aggregate_id: str, fold: type[S]) -> S | None:
        kv = await self.conn.kv(self.conn.names.snapshots)
        entry = await get_entry(kv, self._key(aggregate, aggregate_id))
        if entry is None or not entry.value:
            return None
        try:
            stored = msgspec.msgpack.decode(entry.value, type=_Stored)
            if stored.schema != fold.SCHEMA and stored.schema not in fold.UPGRADES:
                log.info(
                    "snapshot of %s %s has shape %d, not %d: replaying the log instead",
                    aggregate,
                    aggregate_id,
                    stored.schema,
                    fold.SCHEMA,
                )
                return None
            blob = stored.state
            if stored.object_name:
                blob = await self.conn.read_artifact(stored.object_name)
            packed = await _off_loop(zlib.decompress, blob)
            return decode_snapshot(fold, packed, stored.schema)
        except (
            msgspec.DecodeError,
            msgspec.ValidationError,
            ObjectNotFoundError,
            DirectGetError,
            zlib.error,
        ) as exc:
            log.warning("ignoring unreadable snapshot of %s %s: %s", aggregate, aggregate_id, exc)
            return None

    async def write(self, aggregate: Aggregate, aggregate_id: str, packed: PackedSnapshot) -> None:
        stored = _Stored(seq=packed.seq, n=packed.n, schema=packed.schema)
        blob = await _off_loop(zlib.compress, packed.data, 1)
        if len(blob) <= INLINE_LIMIT:
            stored.state = blob
        else:
            name = f"snapshot/{aggregate}/{aggregate_id}"
            objects = await self.conn.artifacts()
            await objects.put(name, blob)
            stored.object_name = name
        kv = await self.conn.kv(self.conn.names.snapshots)
        await kv.put(self._key(aggregate, aggregate_id), msgspec.msgpack.encode(stored))


async def _off_loop(fn: Callable[..., bytes], data: bytes, *args: int) -> bytes:
    """Run zlib on a worker thread when the payload is big enough to stall the event loop
    (zlib releases the GIL)."""
    if len(data) < OFF_LOOP_BYTES:
        return fn(data, *args)
    return await asyncio.to_thread(fn, data, *args)


def snapshot_interval(every: int, version: int) -> int:
    """``every``, or the power of two at or above ``version / 8`` once that is larger."""
    target = version // 8
    if target <= every:
        return every
    return 1 << (target - 1).bit_length()


class Snapshots:
    """Takes snapshots when due (``every`` events; 0 never), in the background."""

    def __init__(self, store: SnapshotIO, every: int) -> None:
        self.store = store
        self.every = every
        self._writing: set[tuple[Aggregate, str]] = set()
        self._pending: set[asyncio.Task[Any]] = set()
        self._since: dict[tuple[Aggregate, str], int] = {}
        """Per aggregate: the version of the last snapshot this taker started, else the one
        before its first save (what :meth:`at_rest` counts from)."""

    def due(self, version: int, previous_version: int) -> bool:
        if self.every <= 0:
            return False
        interval = snapshot_interval(self.every, version)
        return version // interval != previous_version // interval

    def after_save(
        self,
        aggregate: Aggregate,
        aggregate_id: str,
        state: Fold,
        previous_version: int,
    ) -> None:
        """Start a background snapshot if one is due and none is being written."""
        key = (aggregate, aggregate_id)
        self._since.setdefault(key, previous_version)
        if not self.due(state.version, previous_version) or key in self._writing:
            return  # a skipped one is taken at the next interval: it only saves replay time
        self._take(key, state)

    async def at_rest(
        self, aggregate: Aggregate, aggregate_id: str, state: Fold, timeout_s: float
    ) -> None:
        """The writer is done with the aggregate for now and its appends have landed: take a
        snapshot if ``every`` events or more were saved since this taker's last one, so the
        next load (a resume, a reader) replays none of them. On a long aggregate the schedule
        above leaves up to ~1/4 of the log behind its last snapshot: 13,000 events of a
        100,000-step trace, ~0.5 s of CPU on every load (issue 46)."""
        key = (aggregate, aggregate_id)
        since = self._since.get(key)
        if self.every <= 0 or since is None or state.version - since < self.every:
            return
        await drain(self._pending, timeout_s)  # an older snapshot must not land after this one
        self._take(key, state)

    def _take(self, key: tuple[Aggregate, str], state: Fold) -> None:
        self._writing.add(key)
        self._since[key] = state.version
        packed = pack_snapshot(state)
        task = asyncio.create_task(self._write(key, packed), name=f"snapshot-{key[1]}")
        self._pending.add(task)
        task.add_done_callback(self._done)

    async def _write(self, key: tuple[Aggregate, str], packed: PackedSnapshot) -> None:
        aggregate, aggregate_id = key
        try:
            await self.store.write(aggregate, aggregate_id, packed)
        finally:
            self._writing.discard(key)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("background snapshot write failed: %s", task.exception())

    async def flush(self, timeout_s: float) -> None:
        """Wait (bounded) for snapshots being written; cancel what is left."""
        await drain(self._pending, timeout_s)
