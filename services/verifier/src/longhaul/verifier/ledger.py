"""Run each verification request's checks at most once per live claim, and reuse the verdict.

A request is keyed ``verify.<trace_id>.<attempt>`` in ``lh_leases``. The replica that creates
the key runs the checks, renewing the claim (short TTL) while they run, then writes the verdict
under the same key. A redelivered request (a short acknowledgement wait brings it back within
seconds of a consumer's death) finds the key: a verdict is reused as is; a live claim is waited
for; a claim whose holder died (recorded dead by its supervisor, or its TTL run out) is claimed
again, and the new
holder finds the dead one's command still running, or finished, through its keeper
(:mod:`longhaul.verifier.command_spool`): the command itself is never started twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.domain.ids import process_incarnation
from longhaul.domain.liveness import dead_key
from longhaul.verifier.result import Verdict
from nats.js.errors import APIError, KeyWrongLastSequenceError

log = logging.getLogger(__name__)

VERDICT_TTL_S = 3600
"""How long a verdict stays for a redelivered request (far beyond any redelivery)."""
POLL_S = 0.2


class Claim(msgspec.Struct, kw_only=True):
    incarnation: str
    verdict: Verdict | None = None


class VerdictLedger:
    def __init__(self, conn: Connection, *, ttl_s: float) -> None:
        self.conn = conn
        self.ttl_s = max(1, round(ttl_s))

    async def once(self, key: str, run: Callable[[], Awaitable[Verdict]]) -> Verdict:
        kv = await self.conn.kv(self.conn.names.leases)
        while True:
            mine = Claim(incarnation=process_incarnation())
            try:
                revision = await kv.create(key, msgspec.json.encode(mine), msg_ttl=self.ttl_s)
            except KeyWrongLastSequenceError:
                verdict = await self._wait(key)
                if verdict is not None:
                    log.info("%s: reusing the verdict of an earlier run", key)
                    return verdict
                continue
            break
        keeper = asyncio.create_task(self._keep(key, int(revision), mine))
        try:
            verdict = await run()
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
        done = msgspec.json.encode(Claim(incarnation=mine.incarnation, verdict=verdict))
        try:
            await self._publish(key, done, ttl_s=VERDICT_TTL_S)
        except (APIError, TimeoutError) as exc:  # the verdict is still appended by the caller
            log.warning("%s: verdict not recorded: %s", key, exc)
        return verdict

    async def _wait(self, key: str) -> Verdict | None:
        """The verdict of the claim on ``key``, or None once the claim is gone (its holder
        died). KV TTL expiry publishes nothing to watch, hence the polling."""
        kv = await self.conn.kv(self.conn.names.leases)
        while True:
            entry = await get_entry(kv, key)
            if entry is None or not entry.value:
                return None
            with contextlib.suppress(msgspec.DecodeError):
                claim = msgspec.json.decode(entry.value, type=Claim)
                if claim.verdict is not None:
                    return claim.verdict
                if await self._dead(claim.incarnation):
                    with contextlib.suppress(KeyWrongLastSequenceError):
                        await self._publish(
                            key, b"", ttl_s=1, last=int(entry.revision or 0), delete=True
                        )
                    log.info("%s: its claimant %s died; claiming it again", key, claim.incarnation)
                    return None
            await asyncio.sleep(POLL_S)

    async def _dead(self, incarnation: str) -> bool:
        """True when a supervisor recorded ``incarnation``'s death (no TTL wait then)."""
        kv = await self.conn.kv(self.conn.names.leases)
        return await get_entry(kv, dead_key(incarnation)) is not None

    async def _keep(self, key: str, revision: int, claim: Claim) -> None:
        value = msgspec.json.encode(claim)
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            started = time.monotonic()
            try:
                revision = await self._publish(key, value, ttl_s=self.ttl_s, last=revision)
            except KeyWrongLastSequenceError:
                log.warning("%s: claim taken over while running", key)
                return
            except (APIError, TimeoutError) as exc:
                log.warning(
                    "%s: claim not renewed (%s) after %.1fs", key, exc, time.monotonic() - started
                )

    async def _publish(
        self, key: str, value: bytes, *, ttl_s: int, last: int | None = None, delete: bool = False
    ) -> int:
        headers = {"Nats-TTL": f"{ttl_s}s"}
        if delete:
            headers["KV-Operation"] = "DEL"
        if last is not None:
            headers["Nats-Expected-Last-Subject-Sequence"] = str(last)
        subject = f"$KV.{self.conn.names.leases}.{key}"
        try:
            ack = await self.conn.js.publish(subject, value, headers=headers)
        except APIError as exc:
            if exc.err_code in (10071, 10164):
                raise KeyWrongLastSequenceError(description=exc.description) from exc
            raise
        return int(ack.seq)
