"""Erasing an aggregate from every place JetStream holds it.

An event log is append-only by design, so deletion is not an event: the aggregate's subjects
are purged from the stream (JetStream removes the messages and their bytes), and every bucket
entry keyed by its id is purged the same way — by subject on the bucket's backing stream, so
no delete marker keeps even the key's name. The one exception is the trace index: its
watchers (the gateway's mirror) must see the entry go, and a late writer must not bring it
back, so it gets a *tombstone* (:func:`longhaul.core.index.TraceIndex.bury`) that expires by
itself. Objects are removed with their chunks and their metadata.

The places, per trace: events ``lh.ev.trace.<id>.>``; ``lh_snapshots`` ``trace.<id>`` (and
its object ``snapshot/trace/<id>``); ``lh_traces`` (tombstone) and ``lh_active`` ``<id>``;
``lh_leases`` ``trace.<id>`` and ``verify.<id>.*``; ``lh_workspace`` ``outputs/<id>/…``,
``uploads/<id>/…``, ``trace/<id>/…`` (attachments), ``context/<id>/…`` (what its model was
shown), ``a2a/<owner>/<id>`` (an A2A client's ``contextId``), ``ag-ui/<owner>/<id>`` (the last
AG-UI message a thread's run took), ``openai/<owner>/<id>/…`` (the
``/v1`` conversations that continue it) and the key's images the trace names
(``images/<owner>/<sha256>``), each with its object when the value was offloaded;
``lh_notifications`` ``<id>.>`` (its deliveries). Per task: events ``lh.ev.task.<id>.>``,
``lh_snapshots`` ``task.<id>``, ``lh_checkpoints`` ``task.<id>.*``, ``lh_workspace``
``task/<id>/…`` and ``lh_notifications`` ``<id>.>``. Per schedule: events
``lh.ev.schedule.<id>.>`` and ``lh_notifications`` ``<id>.>``. The working directory lives on
the executors' disks and is theirs to remove (``longhaul.executor.erasure``).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from longhaul.core.connection import Connection
from longhaul.core.experiences import owner_segment
from longhaul.core.index import TraceIndex
from longhaul.core.spend import forget_traces
from longhaul.core.workspace import stored_object, workspace_subject
from longhaul.domain.events import Aggregate
from nats.js.errors import NotFoundError, ObjectNotFoundError

log = logging.getLogger(__name__)


@dataclass
class Removed:
    """What an erasure removed (the counts a report and the metrics show)."""

    events: int = 0
    entries: int = 0
    """Bucket entries: snapshots, leases, workspace values, checkpoints, index marks."""
    objects: int = 0
    ids: list[str] = field(default_factory=list)

    def add(self, other: Removed) -> None:
        self.events += other.events
        self.entries += other.entries
        self.objects += other.objects
        self.ids.extend(other.ids)


class Eraser:
    def __init__(self, conn: Connection, index: TraceIndex) -> None:
        self.conn = conn
        self.index = index

    async def _count(self, stream: str, subjects: str) -> dict[str, int]:
        """The subjects matching ``subjects`` that hold messages, with their counts."""
        try:
            info = await self.conn.js.stream_info(stream, subjects_filter=subjects)
        except NotFoundError:
            return {}
        return dict(info.state.subjects or {})

    async def _purge(self, stream: str, subjects: str) -> int:
        """Remove every message on ``subjects``; returns how many there were."""
        found = await self._count(stream, subjects)
        if found:
            await self.conn.js.purge_stream(stream, subject=subjects)
        return sum(found.values())

    async def _purge_bucket(self, bucket: str, keys: str) -> int:
        """Remove the entries of a KV ``bucket`` whose key matches ``keys`` (wildcards
        allowed) with their history; returns how many keys there were."""
        found = await self._count(f"KV_{bucket}", f"$KV.{bucket}.{keys}")
        if found:
            await self.conn.js.purge_stream(f"KV_{bucket}", subject=f"$KV.{bucket}.{keys}")
        return len(found)

    async def delete_object(self, name: str) -> bool:
        """Remove an object's chunks and its metadata (no delete marker names it)."""
        store = await self.conn.artifacts()
        try:
            info = await store.get_info(name)
        except ObjectNotFoundError:
            return False
        bucket = self.conn.names.artifacts
        stream = f"OBJ_{bucket}"
        meta = base64.urlsafe_b64encode(name.encode()).decode()
        await self.conn.js.purge_stream(stream, subject=f"$O.{bucket}.C.{info.nuid}")
        await self.conn.js.purge_stream(stream, subject=f"$O.{bucket}.M.{meta}")
        return True

    async def erase_workspace(self, prefixes: Iterable[str]) -> Removed:
        """Remove the workspace entries at or under each ``/``-separated prefix, with the
        objects their large values live in."""
        bucket = self.conn.names.workspace
        subjects = [workspace_subject(bucket, prefix) for prefix in prefixes]
        return await self._erase_workspace_subjects(
            [pattern for subject in subjects for pattern in (subject, f"{subject}.>")]
        )

    async def _erase_workspace_subjects(self, patterns: Iterable[str]) -> Removed:
        """Remove the workspace entries on each subject pattern (wildcards allowed), with the
        objects their large values live in."""
        removed = Removed()
        kv_stream = f"KV_{self.conn.names.workspace}"
        for pattern in patterns:
            found = await self._count(kv_stream, pattern)
            for key_subject in found:
                name = await self._object_of(kv_stream, key_subject)
                if name is not None and await self.delete_object(name):
                    removed.objects += 1
            if found:
                await self.conn.js.purge_stream(kv_stream, subject=pattern)
            removed.entries += len(found)
        return removed

    async def _object_of(self, stream: str, subject: str) -> str | None:
        try:
            msg = await self.conn.js.get_last_msg(stream, subject, direct=True)
        except NotFoundError:
            return None
        return stored_object(msg.data or b"")

    async def erase_trace(self, trace_id: str, *, workspace: Iterable[str] = ()) -> Removed:
        """Erase one trace (not its sub-traces: the caller walks the family). ``workspace``
        names further entries it owns (its images)."""
        names = self.conn.names
        removed = Removed(ids=[trace_id])
        # the log first: any writer still holding the trace's position is refused from now on
        removed.events = await self._purge(names.stream, names.aggregate_filter("trace", trace_id))
        removed.add(await self._erase_snapshot("trace", trace_id))
        removed.entries += await self._purge_bucket(names.leases, f"trace.{trace_id}")
        removed.entries += await self._purge_bucket(names.leases, f"verify.{trace_id}.>")
        kinds = ("outputs", "uploads", "trace", "context")
        removed.add(await self.erase_workspace([f"{k}/{trace_id}" for k in kinds] + [*workspace]))
        # what a protocol surface keeps per key and trace, found without knowing the key
        head = f"$KV.{names.workspace}"
        removed.add(
            await self._erase_workspace_subjects(
                [
                    f"{head}.a2a.*.{trace_id}",
                    f"{head}.ag-ui.*.{trace_id}",
                    f"{head}.openai.*.{trace_id}.>",
                ]
            )
        )
        removed.entries += await self._purge_bucket(names.notifications, f"{trace_id}.>")
        # the tombstone before the active mark: an index update that passed its check just
        # before the tombstone may still mark the trace active, then loses its write's CAS
        await self.index.bury(trace_id)
        removed.entries += await self._purge_bucket(names.active, trace_id)
        return removed

    async def erase_task(self, task_id: str) -> Removed:
        """Erase a task's own records (its step traces are erased one by one by the caller)."""
        names = self.conn.names
        removed = Removed(ids=[task_id])
        removed.events = await self._purge(names.stream, names.aggregate_filter("task", task_id))
        removed.add(await self._erase_snapshot("task", task_id))
        removed.entries += await self._purge_bucket(names.checkpoints, f"task.{task_id}.>")
        removed.add(await self.erase_workspace([f"task/{task_id}"]))
        removed.entries += await self._purge_bucket(names.notifications, f"{task_id}.>")
        return removed

    async def erase_schedule(self, schedule_id: str) -> Removed:
        """A schedule's log (its failed ticks) and their notifications' deliveries; the
        schedule's own entry goes with its key's records or its ``DELETE``."""
        names = self.conn.names
        removed = Removed(ids=[schedule_id])
        removed.events = await self._purge(
            names.stream, names.aggregate_filter("schedule", schedule_id)
        )
        removed.entries = await self._purge_bucket(names.notifications, f"{schedule_id}.>")
        return removed

    async def erase_key_records(self, owner: str) -> Removed:
        """What a key holds outside its traces and tasks: its experiences, its eval runs, its
        images, its upload quota's count, its spend per day (which names its traces), what
        the protocol surfaces kept for it (also what a release before per-trace keys left:
        ``openai/<owner>/<digest>``)."""
        removed = await self.erase_workspace(
            [
                f"images/{owner}",
                f"quota/uploads/{owner}",
                f"a2a/{owner}",
                f"ag-ui/{owner}",
                f"openai/{owner}",
            ]
        )
        below_owner = f"{owner_segment(owner)}.>"
        names = self.conn.names
        for bucket in (names.experiences, names.evals, names.schedules, names.spend):
            removed.entries += await self._purge_bucket(bucket, below_owner)
        return removed

    async def forget_spent(self, owner: str, trace_ids: list[str]) -> None:
        """Erased traces leave their key's spend counted but named by no id."""
        await forget_traces(self.conn, owner, trace_ids)

    async def _erase_snapshot(self, aggregate: Aggregate, aggregate_id: str) -> Removed:
        removed = Removed()
        removed.entries = await self._purge_bucket(
            self.conn.names.snapshots, f"{aggregate}.{aggregate_id}"
        )
        if await self.delete_object(f"snapshot/{aggregate}/{aggregate_id}"):
            removed.objects += 1
        return removed
