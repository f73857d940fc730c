"""The ``lh_notifications`` KV bucket: one :class:`~longhaul.domain.notify.DeliveryRecord`
per notification delivery, keyed by its delivery id (``<run id>.<notice id>.<webhook>``).

The notifier reads a record before each attempt (a delivery already made or abandoned is not
made again when its event comes back) and writes it after; the gateway lists a run's records
with one watch on ``<run id>.>``. Writes are compare-and-set on the revision read, so two
replicas handling the same event after a redelivery cannot both count one attempt.
"""

from __future__ import annotations

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.core.kvscan import current_entries
from longhaul.domain.ids import is_valid_id
from longhaul.domain.notify import DeliveryRecord
from nats.js.kv import KeyValue


class NotificationRecords:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.notifications)

    async def get(self, delivery_id: str) -> tuple[DeliveryRecord | None, int]:
        """The record and its revision (``None, 0``: never attempted)."""
        kv = await self._kv()
        entry = await get_entry(kv, delivery_id)
        if entry is None or not entry.value:
            return None, 0
        return msgspec.json.decode(entry.value, type=DeliveryRecord), entry.revision or 0

    async def put(self, record: DeliveryRecord, revision: int) -> int:
        """Write ``record`` over ``revision`` (0: create); raises when another writer got in
        first (the caller's delivery is then handled again from the log)."""
        kv = await self._kv()
        data = msgspec.json.encode(record)
        if revision:
            return await kv.update(record.delivery_id, data, last=revision)
        return await kv.create(record.delivery_id, data)

    async def of_run(self, aggregate_id: str) -> list[DeliveryRecord]:
        """Every delivery of a trace's or task's notices, oldest first."""
        if not is_valid_id(aggregate_id):
            return []
        entries = await current_entries(await self._kv(), f"{aggregate_id}.>")
        records = [msgspec.json.decode(e.value or b"", type=DeliveryRecord) for e in entries]
        return sorted(records, key=lambda r: (r.created_at, r.delivery_id))
