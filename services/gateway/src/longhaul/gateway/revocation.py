"""A revoked key stops: what a key removed from ``gateway.api_keys`` left running.

A key is revoked by removing it from the configuration and restarting. A gateway serves only
the keys it is configured with (``KeyRing.admits``), and that holds for what runs without a
request too: a trigger of another owner answers 404 as an unknown one, and no schedule of
another owner starts a run (``starting.start``, ``schedules.ticker``).

Which owners count as *revoked* here, rather than merely unknown: those whose data this
gateway found when it started (index entries, schedules, triggers) and for which it has no
key. During a rolling change of the keys a gateway still on the old list meets a newly added
key's runs and schedules; it leaves them alone (they were not there when it started) instead of
stopping them. A revoked owner's runs that have not ended (running, waiting, or queued for an
executor) are asked to stop with reason ``key_revoked``, and so is any later one (a step its
task's planner starts); its schedules are paused with ``paused_reason: key_revoked``. What the
key left stays for the operator to see (``GET /api/admin/keys``) and erase, or to hand back by
configuring the key again (a stopped run resumes on its owner's next message, a paused
schedule on its owner's resume).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from longhaul.core.index import TraceIndexEntry
from longhaul.domain import events as ev
from longhaul.domain.state.trace import FINAL_STATUSES
from longhaul.gateway import access, commands
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.store import ScheduleStore
from longhaul.gateway.schemas.traces import KeyHoldings

log = logging.getLogger(__name__)

KEY_REVOKED = "key_revoked"
"""The stop reason of a revoked key's runs and the ``paused_reason`` of its schedules."""
RETRY_S = 1.0


class Revocation:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.revoked: set[str] = set()
        """Owners whose data was here at start and whose key is not configured."""
        self._stops: asyncio.Queue[str] = asyncio.Queue()
        self._asked: set[str] = set()

    def found(self, owners: Iterable[str | None]) -> None:
        """Owners of data this gateway found as it started: the unconfigured ones are revoked."""
        keys = self.runtime.keys
        fresh = {o for o in owners if o and not keys.admits(o)} - self.revoked
        if fresh:
            log.warning("revoked keys still own data: %s", ", ".join(sorted(fresh)))
            self.revoked |= fresh

    def is_revoked(self, owner: str) -> bool:
        return owner in self.revoked

    def observe(self, entry: TraceIndexEntry) -> None:
        """The mirror took ``entry``: a revoked owner's run that has not ended is stopped."""
        if not self.revoked or entry.status in FINAL_STATUSES or entry.trace_id in self._asked:
            return
        owner = self.runtime.mirror.owner_of(entry)
        if owner is not None and owner in self.revoked:
            self._asked.add(entry.trace_id)
            self._stops.put_nowait(entry.trace_id)

    async def run(self, stop: asyncio.Event) -> None:
        """Once the mirror holds the whole index: find the revoked owners, stop their runs,
        then keep stopping the ones that appear."""
        mirror = self.runtime.mirror
        await mirror.ready.wait()
        self.found(mirror.owner_of(entry) for entry in list(mirror.entries.values()))
        for entry in list(mirror.entries.values()):
            self.observe(entry)
        mirror.observers.append(self.observe)
        while not stop.is_set():
            trace_id = await self._stops.get()
            try:
                await self._stop(trace_id)
            except ApiError as exc:  # NATS away: try again shortly
                log.warning("run %s of a revoked key not stopped yet: %s", trace_id, exc.message)
                await asyncio.sleep(RETRY_S)
                self._stops.put_nowait(trace_id)

    async def _stop(self, trace_id: str) -> None:
        async with self.runtime.nats_call():
            state = await self.runtime.traces.load(trace_id)
        if state.exists:
            log.info("stopping run %s of a revoked key", trace_id)
            await commands.stop_for_erasure(self.runtime, state, reason=KEY_REVOKED)


async def holdings(runtime: Runtime, store: ScheduleStore) -> list[KeyHoldings]:
    """What each owner holds, configured keys first (an operator's rare, whole-deployment
    read: every task's creation is read)."""
    found: dict[str, dict[str, int]] = {owner: {} for owner in sorted(runtime.keys.owners)}

    def count(owner: str | None, what: str) -> None:
        if owner:
            held = found.setdefault(owner, {})
            held[what] = held.get(what, 0) + 1

    mirror = runtime.mirror
    for entry in list(mirror.entries.values()):
        owner = mirror.owner_of(entry)
        count(owner, "traces")
        if entry.status not in FINAL_STATUSES:
            count(owner, "active_traces")
    for task_id in await access.task_ids(runtime):
        async with runtime.nats_call():
            created = await access.first_event(runtime, "task", task_id)
        if isinstance(created, ev.TaskCreated):
            count(created.owner, "tasks")
    async with runtime.nats_call():
        schedules = [record for record, _ in await store.every()]
        triggers = await store.every_trigger()
    for record in schedules:
        count(record.owner, "schedules")
        if record.paused:
            count(record.owner, "paused_schedules")
    for trigger in triggers:
        count(trigger.owner, "triggers")
    listed = [
        KeyHoldings(
            owner=owner,
            configured=runtime.keys.admits(owner),
            **{field: held.get(field, 0) for field in _COUNTED},
        )
        for owner, held in found.items()
    ]
    return sorted(listed, key=lambda held: (not held.configured, held.owner))


_COUNTED = ("traces", "active_traces", "tasks", "schedules", "paused_schedules", "triggers")
