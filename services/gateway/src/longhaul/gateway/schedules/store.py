"""The ``lh_schedules`` bucket (keys in ``records``): compare-and-set writes, listings by
key pattern."""

from __future__ import annotations

import hashlib

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.experiences import owner_segment
from longhaul.core.kv import get_entry
from longhaul.core.kvscan import current_entries
from longhaul.domain.ids import is_valid_id
from longhaul.gateway.schedules.records import ScheduleRecord, TriggerRecord
from longhaul.gateway.schedules.signing import TOLERANCE_S
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

SCHEDULE_PREFIX = "sched"
TRIGGER_PREFIX = "trg"
TRIGGER_NAME_PREFIX = "trgname"
SIGNED_PREFIX = "signed"
SIGNED_TTL_S = 2 * TOLERANCE_S + 60
"""How long a signature's claim is kept: past it, the request's timestamp is refused anyway."""


class StaleRecord(Exception):
    """Another writer changed the entry since it was read."""


class ScheduleStore:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.schedules)

    @staticmethod
    def _key(owner: str | None, kind: str, identifier: str) -> str:
        if not is_valid_id(identifier):
            raise ValueError(f"invalid id {identifier!r}")
        return f"{owner_segment(owner)}.{kind}.{identifier}"

    # -- schedules -------------------------------------------------------------------------

    async def create(self, record: ScheduleRecord) -> None:
        kv = await self._kv()
        key = self._key(record.owner, SCHEDULE_PREFIX, record.schedule_id)
        await kv.create(key, msgspec.json.encode(record))

    async def get(self, owner: str, schedule_id: str) -> tuple[ScheduleRecord, int] | None:
        """The schedule and its revision, or ``None`` (unknown, or another key's)."""
        if not is_valid_id(schedule_id, SCHEDULE_PREFIX):
            return None
        kv = await self._kv()
        entry = await get_entry(kv, self._key(owner, SCHEDULE_PREFIX, schedule_id))
        if entry is None or not entry.value or entry.revision is None:
            return None
        return msgspec.json.decode(entry.value, type=ScheduleRecord), entry.revision

    async def update(self, record: ScheduleRecord, revision: int) -> int:
        """Write ``record`` if the entry is still at ``revision``; its new revision."""
        kv = await self._kv()
        key = self._key(record.owner, SCHEDULE_PREFIX, record.schedule_id)
        try:
            return int(await kv.update(key, msgspec.json.encode(record), last=revision))
        except KeyWrongLastSequenceError as exc:
            raise StaleRecord(record.schedule_id) from exc

    async def delete(self, owner: str, schedule_id: str) -> None:
        kv = await self._kv()
        await kv.purge(self._key(owner, SCHEDULE_PREFIX, schedule_id))

    async def owned(self, owner: str) -> list[ScheduleRecord]:
        """Every schedule of ``owner``, newest first (ids are ULIDs)."""
        return sorted(
            (
                record
                for record, _ in await self._scan(f"{owner_segment(owner)}.{SCHEDULE_PREFIX}.*")
            ),
            key=lambda r: r.schedule_id,
            reverse=True,
        )

    async def every(self) -> list[tuple[ScheduleRecord, int]]:
        """Every key's schedules with their revisions: what the ticker looks at."""
        return await self._scan(f"*.{SCHEDULE_PREFIX}.*")

    async def _scan(self, pattern: str) -> list[tuple[ScheduleRecord, int]]:
        kv = await self._kv()
        return [
            (msgspec.json.decode(entry.value or b"", type=ScheduleRecord), entry.revision or 0)
            for entry in await current_entries(kv, pattern)
        ]

    # -- triggers --------------------------------------------------------------------------

    @staticmethod
    def _name_key(owner: str | None, name: str) -> str:
        digest = hashlib.sha256(name.encode()).hexdigest()[:40]
        return f"{owner_segment(owner)}.{TRIGGER_NAME_PREFIX}.{digest}"

    async def create_trigger(self, record: TriggerRecord) -> bool:
        """Create it, unless the owner has a trigger of that name already (False). The name
        is claimed first with a create, so of two racing creates of one name one wins; a
        claim whose trigger never landed (a crash in between) is taken over."""
        kv = await self._kv()
        name_key = self._name_key(record.owner, record.name)
        claim = record.trigger_id.encode()
        try:
            await kv.create(name_key, claim)
        except KeyWrongLastSequenceError:
            held = await kv.get(name_key)
            holder = (held.value or b"").decode()
            if holder and await self.trigger(holder, record.owner) is not None:
                return False
            try:
                await kv.update(name_key, claim, last=held.revision)
            except KeyWrongLastSequenceError:
                return False  # another create took it over first
        key = self._key(record.owner, TRIGGER_PREFIX, record.trigger_id)
        await kv.create(key, msgspec.json.encode(record))
        return True

    async def triggers(self, owner: str) -> list[TriggerRecord]:
        kv = await self._kv()
        entries = await current_entries(kv, f"{owner_segment(owner)}.{TRIGGER_PREFIX}.*")
        records = [msgspec.json.decode(e.value or b"", type=TriggerRecord) for e in entries]
        return sorted(records, key=lambda r: r.created_at, reverse=True)

    async def every_trigger(self) -> list[TriggerRecord]:
        """Every key's triggers (the operator's listing of what each key holds)."""
        kv = await self._kv()
        entries = await current_entries(kv, f"*.{TRIGGER_PREFIX}.*")
        return [msgspec.json.decode(e.value or b"", type=TriggerRecord) for e in entries]

    async def trigger(self, trigger_id: str, owner: str | None = None) -> TriggerRecord | None:
        """A trigger by id: the owner's, or (the webhook, which has no key) whoever's it is.
        Ids carry 128 random bits, so only who was given one can name it."""
        if not is_valid_id(trigger_id, TRIGGER_PREFIX):
            return None
        kv = await self._kv()
        pattern = (
            self._key(owner, TRIGGER_PREFIX, trigger_id)
            if owner
            else f"*.{TRIGGER_PREFIX}.{trigger_id}"
        )
        entries = await current_entries(kv, pattern)
        if len(entries) != 1:
            return None
        return msgspec.json.decode(entries[0].value or b"", type=TriggerRecord)

    async def claim_signature(self, trigger_id: str, signature: str, run_id: str) -> str:
        """The run a signed webhook request starts: ``run_id``, unless the same signature
        claimed one first (a replay, under any ``Idempotency-Key``): then that one. The claim
        expires with the timestamp's window (a per-message TTL on the bucket)."""
        digest = hashlib.sha256(f"{trigger_id}\0{signature}".encode()).hexdigest()[:40]
        key = f"{SIGNED_PREFIX}.{digest}"
        kv = await self._kv()
        for _ in range(2):  # a claim that expired between the two reads is made afresh
            try:
                await kv.create(key, run_id.encode(), msg_ttl=SIGNED_TTL_S)
                return run_id
            except KeyWrongLastSequenceError:
                entry = await get_entry(kv, key)
                if entry is not None and entry.value:
                    return entry.value.decode()
        return run_id

    async def delete_trigger(self, owner: str, trigger_id: str) -> None:
        kv = await self._kv()
        record = await self.trigger(trigger_id, owner)
        await kv.purge(self._key(owner, TRIGGER_PREFIX, trigger_id))
        if record is not None:  # the name is free again
            await kv.purge(self._name_key(owner, record.name))
