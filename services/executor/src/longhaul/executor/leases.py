"""Leases in ``lh_leases``: who runs which trace, with a per-key TTL so a dead holder's lease
expires by itself and another replica takes the trace over.

A lease is taken with KV ``create`` (fails if a live lease exists), renewed with a
compare-and-set on the revision (``update(last=rev)``) that also resets its TTL, and released
with a delete marker conditioned on the same revision, so a holder that lost its lease can never
remove its successor's. nats-py's ``update`` cannot send a TTL, so renewals and releases publish
to the bucket subject with the headers themselves. The delete marker carries a short TTL too:
released keys leave nothing behind.

Every lease names its holder's id *and incarnation* (one per process start, set by the
supervisor in ``LONGHAUL_INCARNATION``): a restarted process releases what its dead predecessor
held under the same id instead of waiting for the TTL, and a peer told by the supervisor that
an incarnation died releases that incarnation's leases at once (:meth:`Leases.release_dead`).

The server's TTL is not the only judge: a replica that was down when a key's TTL ran out can
come back as the bucket's leader still holding it (nats-server applies per-message TTLs per
replica). A value not rewritten for :data:`STALE_TTLS` TTLs is therefore treated as expired —
nobody holds it, and :meth:`Leases.acquire` takes it over with a compare-and-set — so a trace
can never be stranded behind a lease that no live process renews.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable

import msgspec
import nats.errors
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.domain.ids import process_incarnation
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue

log = logging.getLogger(__name__)

WRONG_LAST_SEQUENCE = (10071, 10164)
MARKER_TTL = "1s"
STALE_TTLS = 3
"""A lease value older than this many TTLs is expired whatever the server still shows (clocks
of different hosts may disagree by much less than that)."""


class LeaseValue(msgspec.Struct, kw_only=True, omit_defaults=True):
    owner: str
    acquired_at: float
    """When this value was written (every renewal rewrites it): how old a lease is."""
    incarnation: str = ""
    sandbox: str | None = None
    """An executor's presence only: whether its tools run confined (``/readyz`` shows it)."""


class Lease:
    """A held lease. ``lost`` is set when a renewal fails or the TTL may have run out."""

    def __init__(self, leases: Leases, key: str, revision: int, sandbox: str | None) -> None:
        self.leases = leases
        self.sandbox = sandbox
        self.key = key
        self.revision = revision
        self.renewed_at = time.monotonic()
        self.lost = asyncio.Event()
        self.released = False

    @property
    def expired_locally(self) -> bool:
        """True once the TTL may have run out on the server since the last good renewal."""
        return time.monotonic() - self.renewed_at > self.leases.ttl_s * 0.8

    async def renew(self) -> bool:
        """Extend the lease; False if that failed (``lost`` is set once it cannot be ours)."""
        if self.lost.is_set() or self.released:
            return False
        if self.expired_locally:
            self.lost.set()
            return False
        started = time.monotonic()
        try:
            self.revision = await self.leases.publish(self.key, self._value(), last=self.revision)
        except KeyWrongLastSequenceError:
            log.warning("lease %s was taken by another executor", self.key)
            self.lost.set()
            return False
        except Exception as exc:  # NATS unreachable, timeouts: retry until the TTL runs out
            log.warning("lease %s renewal failed: %s", self.key, exc)
            if self.expired_locally:
                self.lost.set()
            return False
        self.renewed_at = started
        return True

    def _value(self) -> bytes:
        return self.leases.value(self.sandbox)

    async def release(self) -> None:
        """Remove the lease if it is still ours; never raises (the TTL is the fallback)."""
        if self.released:
            return
        self.released = True
        if self.lost.is_set():
            return
        try:
            await self.leases.publish(self.key, b"", last=self.revision, delete=True)
        except (KeyWrongLastSequenceError, nats.errors.Error, APIError, TimeoutError) as exc:
            log.info("lease %s not released (%s); it expires by itself", self.key, exc)

    async def keep(self, on_lost: Callable[[], object]) -> None:
        """Renew every third of the TTL (sooner after a failed renewal) until released; call
        ``on_lost`` if the lease goes."""
        interval = self.leases.ttl_s / 3
        while not self.released:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.lost.wait(), timeout=interval)
            if self.released:
                return
            if not self.lost.is_set():
                renewed = await self.renew()
                interval = self.leases.ttl_s / (3 if renewed else 10)
            if self.lost.is_set():
                on_lost()
                return


class Leases:
    def __init__(
        self, conn: Connection, owner: str, ttl_s: float, *, incarnation: str | None = None
    ) -> None:
        self.conn = conn
        self.owner = owner
        self.incarnation = incarnation or process_incarnation()
        self.ttl_s = float(max(1, round(ttl_s)))
        """Whole seconds: the KV client sends TTLs as integer seconds."""
        self.bucket = conn.names.leases

    @staticmethod
    def trace_key(trace_id: str) -> str:
        return f"trace.{trace_id}"

    @staticmethod
    def presence_key(executor_id: str) -> str:
        """``executor.<id>``: held by a replica while it lives (readiness for tests, ops)."""
        return "executor." + re.sub(r"[^A-Za-z0-9_=-]", "_", executor_id)

    def _ttl(self) -> str:
        return f"{int(self.ttl_s)}s"

    async def acquire(self, key: str, *, sandbox: str | None = None) -> Lease | None:
        """Take ``key`` if nobody holds it; None when another holder's lease is live.
        ``sandbox``: the state a presence publishes."""
        kv = await self.conn.kv(self.bucket)
        started = time.monotonic()
        try:
            revision = await kv.create(key, self.value(sandbox), msg_ttl=self.ttl_s)
        except KeyNotFoundError:
            # nats-py's create looks the key up after a wrong-sequence refusal; a lease that
            # expired in between is gone then: free, and the next attempt creates it
            return None
        except KeyWrongLastSequenceError:
            taken = await self._take_stale(kv, key, sandbox)
            if taken is None:
                return None
            revision = taken
        lease = Lease(self, key, int(revision), sandbox)
        lease.renewed_at = started
        return lease

    async def _take_stale(self, kv: KeyValue, key: str, sandbox: str | None) -> int | None:
        """Take ``key`` over if its value is stale (see the module's docstring); its new
        revision, or None when the lease is live or another replica took it first."""
        entry = await get_entry(kv, key)
        if entry is None:
            return None  # expired meanwhile: the next attempt creates it
        if not self._stale(entry.value):
            return None
        try:
            revision = await self.publish(key, self.value(sandbox), last=int(entry.revision or 0))
        except KeyWrongLastSequenceError:
            return None
        log.warning("lease %s was not renewed for %d TTLs; taken over", key, STALE_TTLS)
        return revision

    def _stale(self, value: bytes | None) -> bool:
        if not value:
            return False  # a delete marker: the server treats the key as free already
        try:
            written = msgspec.json.decode(value, type=LeaseValue).acquired_at
        except msgspec.DecodeError:
            return False
        return time.time() - written > self.ttl_s * STALE_TTLS

    def value(self, sandbox: str | None = None) -> bytes:
        held = LeaseValue(
            owner=self.owner, acquired_at=time.time(), incarnation=self.incarnation, sandbox=sandbox
        )
        return msgspec.json.encode(held)

    async def release_dead(self, owner: str, *, incarnation: str | None = None) -> list[str]:
        """Delete the live leases ``owner`` holds under another incarnation than ours (only
        ``incarnation``'s, when given): that process is dead. Conditional on each lease's
        revision, so a lease renewed or retaken meanwhile is left alone. Returns the ids of
        the traces released, for the caller to run them now."""
        kv = await self.conn.kv(self.bucket)
        try:
            keys = await kv.keys()
        except NoKeysError:
            return []
        released = []
        for key in keys:
            entry = await get_entry(kv, key)
            if entry is None:
                continue
            try:
                held = msgspec.json.decode(entry.value or b"", type=LeaseValue)
            except msgspec.DecodeError:
                continue
            if held.owner != owner or held.incarnation == self.incarnation:
                continue
            if incarnation is not None and held.incarnation != incarnation:
                continue
            try:
                await self.publish(key, b"", last=int(entry.revision or 0), delete=True)
            except KeyWrongLastSequenceError:
                continue
            log.info("released %s of dead incarnation %s of %s", key, held.incarnation, owner)
            if key.startswith("trace."):
                released.append(key.removeprefix("trace."))
        return released

    async def holder(self, key: str) -> str | None:
        """The owner of a live lease on ``key``, if any."""
        kv = await self.conn.kv(self.bucket)
        entry = await get_entry(kv, key)
        if entry is None or not entry.value or self._stale(entry.value):
            return None
        try:
            return msgspec.json.decode(entry.value, type=LeaseValue).owner
        except msgspec.DecodeError:
            return "?"

    async def publish(self, key: str, value: bytes, *, last: int, delete: bool = False) -> int:
        """Write ``key`` if its revision is still ``last``; resets the TTL."""
        headers = {
            "Nats-Expected-Last-Subject-Sequence": str(last),
            "Nats-TTL": MARKER_TTL if delete else self._ttl(),
        }
        if delete:
            headers["KV-Operation"] = "DEL"
        try:
            ack = await self.conn.js.publish(f"$KV.{self.bucket}.{key}", value, headers=headers)
        except APIError as exc:
            if exc.err_code in WRONG_LAST_SEQUENCE:
                raise KeyWrongLastSequenceError(description=exc.description) from exc
            raise
        return int(ack.seq)
