"""Shared workspace entries (``lh_workspace`` KV, history ≥ 5) with large values offloaded.

Writes are compare-and-set on the revision the writer read; a value over ``INLINE_LIMIT``
bytes lives in the ``lh_artifacts`` object store and the KV entry holds a reference to it.
Keys use ``/`` in the API (``task/<id>/phase/<pid>/output``) and ``.`` in KV.
"""

from __future__ import annotations

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from nats.js.errors import KeyWrongLastSequenceError

INLINE_LIMIT = 256 * 1024


class WorkspaceConflict(Exception):
    """The entry changed since the revision the writer read."""


class WorkspaceEntry(msgspec.Struct, kw_only=True):
    key: str
    value: bytes
    revision: int


class _Stored(msgspec.Struct, kw_only=True, omit_defaults=True):
    inline: bytes | None = None
    object_name: str | None = None
    size: int = 0


def _kv_key(key: str) -> str:
    parts = [part for part in key.split("/") if part]
    if not parts or any(part in (".", "..") for part in parts):
        raise ValueError(f"invalid workspace key {key!r}")
    for part in parts:
        if not all(ch.isalnum() or ch in "_-=" for ch in part):
            raise ValueError(f"invalid character in workspace key {key!r}")
    return ".".join(parts)


def workspace_subject(bucket: str, key: str) -> str:
    """The KV subject of a workspace ``key`` (``/``-separated) in ``bucket``."""
    return f"$KV.{bucket}.{_kv_key(key)}"


def stored_object(data: bytes) -> str | None:
    """The object a stored workspace value was offloaded to, if any (erasure removes it)."""
    try:
        return msgspec.json.decode(data, type=_Stored).object_name
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


class WorkspaceStore:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def put(self, key: str, value: bytes, *, expected_revision: int | None = None) -> int:
        """Store ``value``; with ``expected_revision`` (0 = must not exist) it is a CAS."""
        kv = await self.conn.kv(self.conn.names.workspace)
        kv_key = _kv_key(key)
        stored = _Stored(size=len(value))
        if len(value) > INLINE_LIMIT:
            name = f"workspace/{key.strip('/')}"
            store = await self.conn.artifacts()
            await store.put(name, value)
            stored.object_name = name
        else:
            stored.inline = value
        data = msgspec.json.encode(stored)
        try:
            if expected_revision is None:
                return int(await kv.put(kv_key, data))
            if expected_revision == 0:
                return int(await kv.create(kv_key, data))
            return int(await kv.update(kv_key, data, last=expected_revision))
        except KeyWrongLastSequenceError as exc:
            raise WorkspaceConflict(f"workspace key {key} changed") from exc

    async def keys_under(self, prefix: str) -> list[str]:
        """The keys at or below ``prefix`` that hold a value (read from the bucket stream's
        subjects: no watch over the whole bucket)."""
        subject = workspace_subject(self.conn.names.workspace, prefix)
        return await self._keys_on(subject, f"{subject}.>")

    async def keys_matching(self, pattern: str) -> list[str]:
        """The keys that hold a value and match ``pattern``: a key whose ``*`` segments stand
        for any one segment."""
        segments = [p if p == "*" else _kv_key(p) for p in pattern.split("/") if p]
        return await self._keys_on(f"$KV.{self.conn.names.workspace}." + ".".join(segments))

    async def _keys_on(self, *patterns: str) -> list[str]:
        bucket = self.conn.names.workspace
        head = f"$KV.{bucket}."
        keys = []
        for pattern in patterns:
            info = await self.conn.js.stream_info(f"KV_{bucket}", subjects_filter=pattern)
            keys += [s.removeprefix(head).replace(".", "/") for s in info.state.subjects or {}]
        return sorted(keys)

    async def get(self, key: str) -> WorkspaceEntry | None:
        kv = await self.conn.kv(self.conn.names.workspace)
        entry = await get_entry(kv, _kv_key(key))
        if entry is None or not entry.value:
            return None
        stored = msgspec.json.decode(entry.value, type=_Stored)
        if stored.object_name:
            value = await self.conn.read_artifact(stored.object_name)
        else:
            value = stored.inline or b""
        return WorkspaceEntry(key=key, value=value, revision=int(entry.revision or 0))
