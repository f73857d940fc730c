"""Writing an imported bundle's logs (the gateway checked and re-identified it).

Every trace of the request is new: its lease is taken first (a fresh id is always free), so
a wake-up on its first events finds it held and comes back once the whole family is written
and the leases are released; each log is appended from an empty position, so a request naming
a trace that exists writes nothing to it. Each creation must name the request's owner.
"""

from __future__ import annotations

import logging

import msgspec
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.imports import ImportReply, ImportRequest
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
    def __init__(self, store: EventStore, leases: Leases, actor: str) -> None:
        self.store = store
        self.leases = leases
        self.actor = actor

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
                await self.store.append("trace", trace_id, events, expected=Position())
        finally:
            for lease in held:
                await lease.release()
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
