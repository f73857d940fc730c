"""The ``lh_experiences`` KV bucket: experiences filed under their API key.

Keys are ``<owner>.<experience id>``: every read and write names the owner, so one key's
records are never reached through another's (the same id under two keys is two records; an
import by one key can only ever write below its own owner). Updates are compare-and-set on the
revision read, so concurrent counter bumps and edits never lose each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.core.kvscan import current_entries
from longhaul.domain.experiences import Experience, is_experience_id
from longhaul.domain.ids import is_valid_id
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

CAS_ATTEMPTS = 8
LOCAL_OWNER = "local"
"""Traces without an owner (a gateway without API keys) file their experiences here."""


class ExperienceExists(Exception):
    """``create`` of an id the owner already has."""


def owner_segment(owner: str | None) -> str:
    segment = owner or LOCAL_OWNER
    if not is_valid_id(segment):
        raise ValueError(f"invalid owner {segment!r}")
    return segment


class ExperienceStore:
    """Per-owner experience records (also the engine's ``ExperienceBook``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.experiences)

    @staticmethod
    def _key(owner: str | None, experience_id: str) -> str:
        if not is_experience_id(experience_id):
            raise ValueError(f"invalid experience id {experience_id!r}")
        return f"{owner_segment(owner)}.{experience_id}"

    async def list(self, owner: str | None) -> list[Experience]:
        """Every record of ``owner`` (one pass over the latest value of each of its keys)."""
        kv = await self._kv()
        entries = await current_entries(kv, f"{owner_segment(owner)}.*")
        found = [msgspec.json.decode(e.value or b"", type=Experience) for e in entries]
        return found

    async def get(self, owner: str | None, experience_id: str) -> Experience | None:
        found = await self._read(owner, experience_id)
        return None if found is None else found[0]

    async def _read(self, owner: str | None, experience_id: str) -> tuple[Experience, int] | None:
        kv = await self._kv()
        entry = await get_entry(kv, self._key(owner, experience_id))
        if entry is None or not entry.value:
            return None
        return msgspec.json.decode(entry.value, type=Experience), int(entry.revision or 0)

    async def put(self, owner: str | None, experience: Experience) -> None:
        """Create or replace ``experience`` under ``owner``."""
        kv = await self._kv()
        await kv.put(self._key(owner, experience.id), msgspec.json.encode(experience))

    async def create(self, owner: str | None, experience: Experience) -> None:
        kv = await self._kv()
        try:
            await kv.create(self._key(owner, experience.id), msgspec.json.encode(experience))
        except KeyWrongLastSequenceError as exc:
            raise ExperienceExists(experience.id) from exc

    async def update(
        self,
        owner: str | None,
        experience_id: str,
        change: Callable[[Experience], Experience],
    ) -> Experience | None:
        """Apply ``change`` to the stored record (compare-and-set, retried on a race); None
        when ``owner`` has no such record."""
        kv = await self._kv()
        for _ in range(CAS_ATTEMPTS):
            found = await self._read(owner, experience_id)
            if found is None:
                return None
            current, revision = found
            changed = change(current)
            try:
                await kv.update(
                    self._key(owner, experience_id), msgspec.json.encode(changed), last=revision
                )
            except KeyWrongLastSequenceError:
                continue
            return changed
        raise RuntimeError(f"experience {experience_id} kept changing; update abandoned")

    async def delete(self, owner: str | None, experience_id: str) -> bool:
        if await self._read(owner, experience_id) is None:
            return False
        kv = await self._kv()
        await kv.delete(self._key(owner, experience_id))
        return True

    # -- the engine's ExperienceBook -----------------------------------------------------

    async def record(self, owner: str | None, experiences: Iterable[Experience]) -> None:
        """Write ``experiences`` (distinct ids) concurrently: an import of a thousand records
        is one round trip's wait, not a thousand, within its request's deadline."""
        await asyncio.gather(*(self.put(owner, experience) for experience in experiences))

    async def credit(self, owner: str | None, ids: Iterable[str], *, helpful: bool) -> None:
        """One more ``helpful`` (or ``harmful``) for each of ``ids`` the owner has."""

        def bump(item: Experience) -> Experience:
            metrics = item.metrics
            return msgspec.structs.replace(
                item,
                metrics=msgspec.structs.replace(
                    metrics,
                    helpful=metrics.helpful + helpful,
                    harmful=metrics.harmful + (not helpful),
                ),
            )

        for experience_id in ids:
            await self.update(owner, experience_id, bump)
