"""What JetStream holds, read directly (not through the API): every subject of the event
stream, of each bucket's stream and of the object store, for tests that show data erased."""

from __future__ import annotations

import base64

from longhaul.core.backup import server_streams
from longhaul.core.connection import Connection
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from nats.js.errors import NotFoundError


async def stored(conn: Connection) -> dict[str, dict[str, int]]:
    """Every subject of the event stream and of each bucket's stream, object names decoded."""
    names = conn.names
    buckets = ("traces", "active", "leases", "snapshots", "checkpoints", "workspace", "experiences")
    streams = [names.stream, *(f"KV_{getattr(names, b)}" for b in buckets)]
    found: dict[str, dict[str, int]] = {}
    for stream in [*streams, f"OBJ_{names.artifacts}"]:
        info = await conn.js.stream_info(stream, subjects_filter=">")
        found[stream] = dict(info.state.subjects or {})
    meta = f"$O.{names.artifacts}.M."
    found["objects"] = {
        base64.urlsafe_b64decode(s[len(meta) :]).decode(): n
        for s, n in found[f"OBJ_{names.artifacts}"].items()
        if s.startswith(meta)
    }
    return found


def naming(found: dict[str, dict[str, int]], ids: list[str]) -> list[str]:
    return sorted(s for subjects in found.values() for s in subjects if any(i in s for i in ids))


async def holding(conn: Connection, ids: list[str]) -> list[str]:
    """The subjects naming ``ids`` that hold something: a released lease's delete marker
    (empty, expiring after a second) holds nothing."""
    leases = f"KV_{conn.names.leases}"
    found = await stored(conn)
    for subject in list(found[leases]):
        last = await conn.js.get_last_msg(leases, subject, direct=True)
        if not last.data:
            del found[leases][subject]
    return naming(found, ids)


async def created_events(conn: Connection, aggregate: Aggregate) -> list[ev.Event]:
    """Every creation event (``trace_created`` / ``task_created``) on the log: counted from
    the stream itself, the one record a run cannot be started without."""
    names = conn.names
    subjects = names.type_filter(aggregate, f"{aggregate}_created")
    info = await conn.js.stream_info(names.stream, subjects_filter=subjects)
    found = []
    for subject, count in (info.state.subjects or {}).items():
        assert count == 1, f"{subject} holds {count} creations"
        message = await conn.js.get_last_msg(names.stream, subject)
        found.append(ev.decode(message.data or b""))
    return found


def _forms(needle: bytes) -> list[bytes]:
    """``needle`` as stored: raw, and inside any base64 text (a workspace value is JSON with
    its bytes in base64) at each of the three alignments, less the edge characters the
    neighbouring bytes change."""
    forms = [needle]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + needle)
        forms.append(encoded[4 if shift else 0 : -4])
    return forms


async def streams_of(conn: Connection) -> list[str]:
    """Every stream of the server that belongs to ``conn``'s namespace: listed by the server,
    so a bucket or object store added later is scanned without being named here."""
    marker = conn.names.namespace.lower()
    return sorted(name for name in await server_streams(conn) if marker in name.lower())


async def holding_bytes(conn: Connection, needles: list[bytes]) -> list[tuple[str, str]]:
    """(stream, subject) of every stored message whose subject or bytes hold one of
    ``needles`` (raw or base64), in every stream of the namespace: events, KV buckets
    (``KV_*``, with their history), object stores (``OBJ_*``, chunks and metadata)."""
    found = []
    for stream in await streams_of(conn):
        state = (await conn.js.stream_info(stream)).state
        for seq in range(max(state.first_seq, 1), state.last_seq + 1):
            try:
                msg = await conn.js.get_msg(stream, seq)
            except NotFoundError:  # purged or deleted
                continue
            subject = msg.subject or ""
            data = (msg.data or b"") + subject.encode()
            if any(form in data for needle in needles for form in _forms(needle)):
                found.append((stream, subject))
    return found
