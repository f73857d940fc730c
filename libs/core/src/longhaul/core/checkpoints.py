"""Phase checkpoints in ``lh_checkpoints`` (``task.<task_id>.phase.<phase_id>``).

A checkpoint is saved for every completed phase (name, result reference, status, task status,
time) when ``pipeline.checkpoint.enabled``; the bucket's max age is
``checkpoint.ttl_seconds``. Resume reads them first, and falls back to the event log for
phases whose checkpoint expired. A checkpoint and its ``phase_completed`` event are written
together; either one alone tells resume the phase is done, so a crash between them loses
nothing. The gateway lists and clears a task's checkpoints (``/api/tasks/{id}/checkpoints``);
a cleared task resumes from its event log.
"""

from __future__ import annotations

import asyncio
import logging
import time

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.core.kvscan import current_entries
from nats.js.kv import KeyValue

log = logging.getLogger(__name__)


class Checkpoint(msgspec.Struct, kw_only=True, omit_defaults=True):
    task_id: str
    phase_id: str
    name: str
    result_ref: str
    summary: str = ""
    trace_id: str | None = None
    status: str = "completed"
    task_status: str = "running"
    saved_at: float = msgspec.field(default_factory=time.time)


def checkpoint_key(task_id: str, phase_id: str) -> str:
    return f"task.{task_id}.phase.{phase_id}"


class Checkpoints:
    def __init__(self, conn: Connection, *, enabled: bool) -> None:
        self.conn = conn
        self.enabled = enabled

    async def save(self, checkpoint: Checkpoint) -> None:
        if not self.enabled:
            return
        kv = await self.conn.kv(self.conn.names.checkpoints)
        await kv.put(
            checkpoint_key(checkpoint.task_id, checkpoint.phase_id), msgspec.json.encode(checkpoint)
        )

    async def load(self, task_id: str, phase_id: str) -> Checkpoint | None:
        """The phase's checkpoint; ``None`` if disabled, never saved, expired or unreadable."""
        if not self.enabled:
            return None
        kv = await self.conn.kv(self.conn.names.checkpoints)
        entry = await get_entry(kv, checkpoint_key(task_id, phase_id))
        if entry is None or not entry.value:
            return None
        try:
            return msgspec.json.decode(entry.value, type=Checkpoint)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("ignoring unreadable checkpoint %s/%s: %s", task_id, phase_id, exc)
            return None

    async def _entries(self, task_id: str) -> list[KeyValue.Entry]:
        kv = await self.conn.kv(self.conn.names.checkpoints)
        return await current_entries(kv, f"task.{task_id}.phase.*")

    async def list(self, task_id: str) -> list[Checkpoint]:
        """Every readable checkpoint of the task (whether saving is enabled or not)."""
        found = []
        for entry in await self._entries(task_id):
            try:
                found.append(msgspec.json.decode(entry.value or b"", type=Checkpoint))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("ignoring unreadable checkpoint %s: %s", entry.key, exc)
        return sorted(found, key=lambda c: c.saved_at)

    async def clear(self, task_id: str) -> int:
        """Purge every checkpoint of the task; how many there were."""
        kv = await self.conn.kv(self.conn.names.checkpoints)
        entries = await self._entries(task_id)
        await asyncio.gather(*(kv.purge(entry.key) for entry in entries))
        return len(entries)
