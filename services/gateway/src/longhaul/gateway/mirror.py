"""An in-memory mirror of the ``lh_traces`` index, kept current by a KV watch.

Listing traces and the traces-by-status metric read this mirror instead of fetching every
key per request. The gateway also writes its own creations into it, so a client that lists
right after creating sees its trace (read-your-writes) even before the watch delivers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.index import TraceIndexEntry
from nats.js.kv import KV_DEL, KV_PURGE

log = logging.getLogger(__name__)

MAX_PARENT_DEPTH = 16
MAX_SUBTREE = 500
"""Descendants visited when looking for waits below a trace (a root's limit is far lower)."""
RESYNC_S = 300.0
"""The watch is an ordered consumer; re-creating it periodically bounds how long a consumer
silently lost across a server restart could leave the mirror stale."""


class IndexMirror:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.entries: dict[str, TraceIndexEntry] = {}
        self._children: dict[str, set[str]] = {}
        self._remote_parents: dict[str, str] = {}
        """``agent://host:port/<id>`` → the local trace that spawned that remote child."""
        self.waiting_on_people: set[str] = set()
        """Traces waiting on a person (a question or an approval): what the inbox reads, so
        its cost follows the waits, not every trace ever indexed."""
        self.ready = asyncio.Event()
        self._changed = asyncio.Condition()
        self.observers: list[Callable[[TraceIndexEntry], None]] = []
        """Told of every entry the mirror keeps (retention schedules the ended ones)."""

    def put(self, entry: TraceIndexEntry) -> None:
        """Keep the entry folded from the later stream position; a tombstone (an erased
        trace) removes it."""
        if entry.is_tombstone:
            self._remove(entry.trace_id)
            return
        current = self.entries.get(entry.trace_id)
        if current is None or entry.last_event_seq >= current.last_event_seq:
            self.entries[entry.trace_id] = entry
            if entry.status == "waiting" and entry.person_wait is not None:
                self.waiting_on_people.add(entry.trace_id)
            else:
                self.waiting_on_people.discard(entry.trace_id)
            for observe in self.observers:
                observe(entry)
            if entry.parent_trace_id is not None:
                self._children.setdefault(entry.parent_trace_id, set()).add(entry.trace_id)
            for remote_id in entry.remote_children:
                self._remote_parents[remote_id] = entry.trace_id

    def _remove(self, trace_id: str) -> None:
        entry = self.entries.pop(trace_id, None)
        self.waiting_on_people.discard(trace_id)
        if entry is not None and entry.parent_trace_id is not None:
            self._children.get(entry.parent_trace_id, set()).discard(trace_id)
        for remote_id in entry.remote_children if entry is not None else ():
            self._remote_parents.pop(remote_id, None)

    def remote_parent(self, remote_id: str) -> str | None:
        """The local trace whose child ``agent://host:port/<id>`` is (None: no such link)."""
        return self._remote_parents.get(remote_id)

    def waiting_below(self, trace_id: str) -> list[TraceIndexEntry]:
        """Descendants of ``trace_id`` waiting on something outside the tree (a person, a
        verifier), nearest first. A parent waiting on its children is implied by them, so
        ``subtraces`` waits are not listed: this is what to look at to unblock the tree."""
        found: list[TraceIndexEntry] = []
        seen: set[str] = set()
        frontier = [trace_id]
        while frontier and len(seen) < MAX_SUBTREE:
            below: list[str] = []
            for current in frontier:
                for child_id in sorted(self._children.get(current, ())):
                    child = self.entries.get(child_id)
                    if child is None or child_id in seen:
                        continue
                    seen.add(child_id)
                    below.append(child_id)
                    if child.status == "waiting" and child.wait_reason != "subtraces":
                        found.append(child)
            frontier = below
        return found

    async def wait_until(self, predicate: Callable[[IndexMirror], bool]) -> None:
        """Wait until the mirror satisfies ``predicate``: lets a caller that wrote the index
        elsewhere (an executor, a test) wait for the watch to deliver it, without polling.
        Callers bound the wait with ``asyncio.timeout``."""
        async with self._changed:
            await self._changed.wait_for(lambda: predicate(self))

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the bucket until cancelled or ``stop``; restarts the watch on errors and
        periodically."""
        delay = 0.5
        while not stop.is_set():
            try:
                await asyncio.wait_for(self._follow(), timeout=RESYNC_S)
            except TimeoutError:
                delay = 0.5
            except Exception as exc:  # a lost connection or consumer: retry with backoff
                log.warning("trace index watch failed: %s; retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _follow(self) -> None:
        kv = await self.conn.kv(self.conn.names.traces)
        watcher = await kv.watchall()
        try:
            async for item in watcher:
                if item is None:
                    self.ready.set()
                elif item.operation in (KV_DEL, KV_PURGE):
                    self._remove(item.key)
                else:
                    try:
                        self.put(msgspec.json.decode(item.value or b"", type=TraceIndexEntry))
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        log.warning("skipping unreadable index entry %s: %s", item.key, exc)
                await self._notify()
        finally:
            with contextlib.suppress(Exception):
                await watcher.stop()

    def owner_of(self, entry: TraceIndexEntry) -> str | None:
        """The entry's owner, inherited from its parent chain when it records none
        (sub-traces spawned by an executor)."""
        current: TraceIndexEntry | None = entry
        for _ in range(MAX_PARENT_DEPTH):
            if current is None:
                return None
            if current.owner:
                return current.owner
            if current.parent_trace_id is None:
                return None
            current = self.entries.get(current.parent_trace_id)
        return None

    def query(
        self,
        *,
        owner: str,
        statuses: frozenset[str] | None = None,
        parent: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        text: str | None = None,
        keep: Callable[[TraceIndexEntry], bool] | None = None,
    ) -> tuple[list[TraceIndexEntry], str | None]:
        """The caller's entries, newest first (trace ids are time-ordered ULIDs).

        ``text`` keeps the entries whose name (or id) contains it, case-insensitively;
        ``keep``, those it says yes to.

        ``cursor`` is the last trace id of the previous page; the next cursor is None on the
        last page.
        """
        page: list[TraceIndexEntry] = []
        needle = (text or "").strip().casefold()
        for entry in self._newest_first(cursor):
            if statuses is not None and entry.status not in statuses:
                continue
            if parent is not None and entry.parent_trace_id != parent:
                continue
            if needle and needle not in f"{entry.name or ''}\n{entry.trace_id}".casefold():
                continue
            if keep is not None and not keep(entry):
                continue
            if self.owner_of(entry) != owner:
                continue
            if len(page) == limit:
                return page, page[-1].trace_id
            page.append(entry)
        return page, None

    def _newest_first(self, cursor: str | None) -> Iterator[TraceIndexEntry]:
        for trace_id in sorted(self.entries, reverse=True):
            if cursor is not None and trace_id >= cursor:
                continue
            yield self.entries[trace_id]
