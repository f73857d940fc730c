"""Writing an imported bundle's logs (the gateway checked and re-identified it).

Every trace of the request is new: its lease is taken first (a fresh id is always free), and
its events are written as ``actor: import``, which no consumer takes for a wake-up, so nothing
acts on a half-written family; each log is appended from an empty position, so a request
naming a trace that exists writes nothing to it. Each creation must name the request's owner.
Once all is written each trace is indexed (listed like any other), the leases are released
and a trace that had not ended is woken.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
from longhaul.core.index import TraceIndex
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.imports import IMPORT_ACTOR, ImportReply, ImportRequest
from longhaul.domain.state import TraceState
from longhaul.executor.leases import Lease, Leases
from nats.aio.msg import Msg

log = logging.getLogger(__name__)

QUEUE = "importers"
"""One executor writes each import."""


class ImportRefused(ValueError):
    pass


def _events(trace_id: str, owner: str | None, raws: list[msgspec.Raw]) -> list[ev.Event]:
    events: list[ev.Event] = []
    for raw in raws:
        try:
            event = ev.decode(bytes(raw))
        except ev.EventDecodeError as exc:
            raise ImportRefused(f"an event of {trace_id} does not decode: {exc}") from exc
        if not isinstance(event, ev.TraceEvent) or event.aggregate_id != trace_id:
            raise ImportRefused(f"an event filed under {trace_id} is not one of its own")
        events.append(event)
    first = events[0] if events else None
    if not isinstance(first, ev.TraceCreated) or first.owner != owner:
        raise ImportRefused(f"trace {trace_id} does not begin with its creation by the importer")
    return events


class ImportWriter:
    def __init__(
        self,
        traces: Repository[TraceState],
        index: TraceIndex,
        leases: Leases,
        wake: Callable[[str], bool],
    ) -> None:
        self.traces = traces
        self.index = index
        self.leases = leases
        self.wake = wake

    async def write(self, request: ImportRequest) -> None:
        logs = [(t.trace_id, _events(t.trace_id, request.owner, t.events)) for t in request.traces]
        held: list[Lease] = []
        try:
            for trace_id, _ in logs:
                lease = await self.leases.acquire(Leases.trace_key(trace_id))
                if lease is None:
                    raise ImportRefused(f"trace {trace_id} is already held")
                held.append(lease)
            for trace_id, events in logs:
                await self.traces.import_log(trace_id, events, actor=IMPORT_ACTOR)
            states = [await self.traces.load(trace_id) for trace_id, _ in logs]
            for state in states:  # listed like any trace
                await self.index.update(state)
        finally:
            for lease in held:
                await lease.release()
        for state in states:
            if not state.is_final and not self.wake(state.trace_id):
                log.info("imported %s waits for the sweeper: no free slot", state.trace_id)
        log.info("imported %d trace(s) for %s", len(logs), request.owner)

    async def on_request(self, msg: Msg) -> None:
        reply = ImportReply()
        try:
            await self.write(msgspec.json.decode(msg.data, type=ImportRequest))
        except (msgspec.DecodeError, msgspec.ValidationError, ImportRefused) as exc:
            reply.error = str(exc)
        except Exception as exc:  # answered, never left to time out: nothing is retried
            log.exception("an import failed")
            reply.error = f"{type(exc).__name__}: {exc}"
        if msg.reply:
            await msg.respond(msgspec.json.encode(reply))
