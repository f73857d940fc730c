"""Listing a key's traces: read from this gateway's index mirror, never the log."""

from __future__ import annotations

import asyncio

from longhaul.core.index import TraceIndexEntry
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.mirror import IndexMirror
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.usecases.evals import not_an_eval_run

MIRROR_READY_S = 5.0


async def ready_mirror(runtime: Runtime) -> IndexMirror:
    """The index mirror; right after start-up this waits (briefly) for the watch's first
    pass (503 if it takes longer)."""
    mirror = runtime.mirror
    if not mirror.ready.is_set():
        try:
            await asyncio.wait_for(mirror.ready.wait(), timeout=MIRROR_READY_S)
        except TimeoutError as exc:
            raise ApiError(503, "unavailable", "trace index is still loading") from exc
    return mirror


async def query_owned(
    runtime: Runtime,
    principal: Principal,
    *,
    limit: int,
    statuses: frozenset[str] | None = None,
    parent: str | None = None,
    cursor: str | None = None,
    text: str | None = None,
    evals_too: bool = True,
) -> tuple[list[TraceIndexEntry], str | None]:
    """The caller's traces from the index mirror, newest first, and the next page's cursor
    (``evals_too=False``: not the runs of evals)."""
    mirror = await ready_mirror(runtime)
    return mirror.query(
        owner=principal.owner,
        statuses=statuses,
        parent=parent,
        cursor=cursor,
        limit=limit,
        text=text,
        keep=None if evals_too else not_an_eval_run,
    )
