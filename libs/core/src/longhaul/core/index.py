"""The ``lh_traces`` index: one small entry per trace, for listing without replaying logs.

Several writers (gateway on create, executor on every turn) update it; an entry is only
replaced by one folded from a later stream position, so a slow writer never moves it back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.kv import get_entry
from longhaul.core.lru import Lru
from longhaul.domain.events import DeadlineAction, Totals
from longhaul.domain.state import TraceState
from longhaul.domain.state.trace import FINAL_STATUSES
from nats.js.errors import KeyWrongLastSequenceError
from nats.js.kv import KeyValue

CAS_ATTEMPTS = 8
WRITTEN_ENTRIES = 4096
"""Traces whose entry this process wrote last that it remembers (revision, position, status):
a running trace's next write goes on that revision without reading the entry first."""
UNMARK_TTL_S = 60
DELETED = "deleted"
"""The status of an erased trace's tombstone (never a trace's own status)."""
TOMBSTONE_TTL_S = 600
"""How long a tombstone outranks a late writer: far longer than a wake-up that loaded the
trace just before it was erased can take to write its entry."""


PERSON_WAITS = frozenset({"human", "approval", "budget"})
"""Waits a person answers: the inbox lists them, with what is needed to answer."""
ASKED = frozenset({"human", "budget"})
"""Waits whose detail is what the person is asked (a question; a budget's spent and limit)."""
MAX_INDEXED_TEXT = 4000
"""A question or a call's arguments longer than this is cut in the entry (``truncated``)."""


class PendingCallEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A call waiting for a person's decision, as the inbox shows it."""

    tool_call_id: str
    name: str
    arguments: str = ""
    truncated: bool = False
    outcome_unknown: bool = False


class PersonWait(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a trace waiting on a person waits for: enough to list and answer it without
    replaying the trace (``GET /api/inbox``)."""

    since: float = 0.0
    question: str = ""
    truncated: bool = False
    calls: list[PendingCallEntry] = msgspec.field(default_factory=list)
    deadline: float | None = None
    on_deadline: DeadlineAction | None = None

    @classmethod
    def of(cls, state: TraceState) -> PersonWait | None:
        if state.status != "waiting" or state.wait_reason not in PERSON_WAITS:
            return None
        wait = state.wait
        calls = [
            PendingCallEntry(
                tool_call_id=call.id,
                name=call.function.name,
                arguments=call.function.arguments[:MAX_INDEXED_TEXT],
                truncated=len(call.function.arguments) > MAX_INDEXED_TEXT,
                outcome_unknown=call.id in state.ledger,
            )
            for call in state.unanswered_tool_calls()
            if call.id in state.approval_pending
        ]
        return cls(
            since=wait.since or state.updated_at,
            question=wait.detail[:MAX_INDEXED_TEXT] if wait.reason in ASKED else "",
            truncated=wait.reason in ASKED and len(wait.detail) > MAX_INDEXED_TEXT,
            calls=calls,
            deadline=wait.deadline,
            on_deadline=wait.on_deadline,
        )


class TraceIndexEntry(msgspec.Struct, kw_only=True, omit_defaults=True):
    trace_id: str
    status: str
    name: str | None = None
    owner: str | None = None
    parent_trace_id: str | None = None
    task_id: str | None = None
    phase_id: str | None = None
    head_sequence: int = 0
    last_sequence: int = 0
    last_event_seq: int = 0
    totals: Totals = msgspec.field(default_factory=Totals)
    error: str | None = None
    stop_reason: str | None = None
    wait_reason: str | None = None
    """What a ``waiting`` trace waits for (human, verification, subtraces…)."""
    faults: int = 0
    """Events of its log the fold had to skip (see ``longhaul.domain.state.faults``)."""
    person_wait: PersonWait | None = None
    """A ``human``, ``approval`` or ``budget`` wait: the question, calls or limit reached,
    since when, the deadline."""
    created_at: float = 0.0
    updated_at: float = 0.0
    remote_children: list[str] = msgspec.field(default_factory=list)
    """``agent://host:port/<id>`` of its children run by remote longhauls: the gateway finds a
    remote trace's local parent (and so its owner) here."""
    eval_id: str | None = None
    """The eval it is one run of (``longhaul eval``): lists leave eval runs out if asked."""

    @classmethod
    def from_state(cls, state: TraceState) -> TraceIndexEntry:
        return cls(
            trace_id=state.trace_id,
            status=state.status or "running",
            name=state.name,
            owner=state.owner,
            parent_trace_id=state.parent_trace_id,
            task_id=state.task_id,
            phase_id=state.phase_id,
            head_sequence=state.head_sequence,
            last_sequence=state.last_sequence,
            last_event_seq=state.stream_seq,
            totals=state.totals,
            error=state.error,
            stop_reason=state.stop_reason,
            wait_reason=state.wait_reason if state.status == "waiting" else None,
            faults=len(state.faults),
            person_wait=PersonWait.of(state),
            created_at=state.created_at,
            updated_at=state.updated_at,
            remote_children=[i.remote_id for i in state.subtraces.values() if i.remote_id],
            eval_id=state.eval.eval_id if state.eval is not None else None,
        )

    @classmethod
    def tombstone(cls, trace_id: str) -> TraceIndexEntry:
        """What an erased trace's entry becomes (:meth:`TraceIndex.bury`)."""
        return cls(trace_id=trace_id, status=DELETED, last_event_seq=2**63 - 1)

    @property
    def is_tombstone(self) -> bool:
        return self.status == DELETED


class TraceIndex:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._written: Lru[str, tuple[int, int, str]] = Lru(WRITTEN_ENTRIES)
        """Trace id → the revision, ``last_event_seq`` and status of the entry this process
        last wrote: a turn writes its trace's entry every ``index_interval_s``, and the
        read before each write was half its round trips. Another writer since (a lost
        compare-and-set) means a read, as without it."""

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.traces)

    async def update(self, state: TraceState) -> bool:
        """Write the entry for ``state`` unless a newer one is stored; True if written.

        A trace that is not final is marked in ``lh_active`` *before* its entry says so, and
        unmarked only after its final entry is written: the sweeper, which reads only the
        marks, never misses a trace under way (a stale mark is healed by the sweeper).
        """
        kv = await self._kv()
        entry = TraceIndexEntry.from_state(state)
        data = msgspec.json.encode(entry)
        final = state.is_final
        known = self._written.pop(state.trace_id)
        if known is not None and known[1] >= entry.last_event_seq:
            known = None  # not newer than ours: what is stored now decides
        for _ in range(CAS_ATTEMPTS):
            revision: int | None
            status: str | None
            if known is not None:
                revision, _seq, status = known
                known = None
            else:
                current = await get_entry(kv, state.trace_id)
                stored = msgspec.json.decode(current.value or b"{}", type=dict) if current else None
                if (
                    stored is not None
                    and int(stored.get("last_event_seq", 0)) >= entry.last_event_seq
                ):
                    return False
                revision = current.revision if current is not None else None
                status = stored.get("status") if stored is not None else None
            if not final and (revision is None or status in FINAL_STATUSES):
                await self.mark_active(state.trace_id)
            try:
                if revision is None:
                    revision = await kv.create(state.trace_id, data)
                else:
                    revision = await kv.update(state.trace_id, data, last=revision)
            except KeyWrongLastSequenceError:
                continue
            self._written.put(state.trace_id, (revision, entry.last_event_seq, entry.status))
            if final:
                await self.unmark_active(state.trace_id)
            return True
        return False

    async def mark_active(self, trace_id: str) -> None:
        active = await self.conn.kv(self.conn.names.active)
        await active.put(trace_id, b"")

    async def unmark_active(self, trace_id: str) -> None:
        active = await self.conn.kv(self.conn.names.active)
        # The purge marker expires: the bucket holds the traces under way and the last
        # minute's finished ones, never the whole history.
        await active.purge(trace_id, msg_ttl=UNMARK_TTL_S)

    async def active_ids(self) -> list[str]:
        """The traces marked as not final."""
        return await _keys(await self.conn.kv(self.conn.names.active))

    async def bury(self, trace_id: str) -> None:
        """Replace the trace's entry (and its history) with a tombstone that names nothing
        but the id and outranks every later :meth:`update` (its ``last_event_seq`` is higher
        than any stream position): an executor that folded the trace just before it was
        erased cannot write it back. The tombstone expires after :data:`TOMBSTONE_TTL_S`."""
        await self.conn.js.publish(
            f"$KV.{self.conn.names.traces}.{trace_id}",
            msgspec.json.encode(TraceIndexEntry.tombstone(trace_id)),
            headers={"Nats-Rollup": "sub", "Nats-TTL": f"{TOMBSTONE_TTL_S}s"},
        )

    async def get(self, trace_id: str) -> TraceIndexEntry | None:
        """The trace's entry; None when there is none or it is a tombstone."""
        found = await self._stored(trace_id)
        return None if found is None or found.is_tombstone else found

    async def buried(self, trace_id: str) -> bool:
        """Whether the trace was erased within the last :data:`TOMBSTONE_TTL_S`."""
        found = await self._stored(trace_id)
        return found is not None and found.is_tombstone

    async def _stored(self, trace_id: str) -> TraceIndexEntry | None:
        kv = await self._kv()
        entry = await get_entry(kv, trace_id)
        if entry is None or not entry.value:
            return None
        return msgspec.json.decode(entry.value, type=TraceIndexEntry)

    async def entries(self) -> AsyncIterator[TraceIndexEntry]:
        """All entries (unordered)."""
        for key in await _keys(await self._kv()):
            entry = await self.get(key)
            if entry is not None:
                yield entry


async def _keys(kv: KeyValue) -> list[str]:
    try:
        return list(await kv.keys())
    except Exception as exc:  # nats-py raises NoKeysError for an empty bucket
        if type(exc).__name__ == "NoKeysError":
            return []
        raise
