"""Export a trace family as a bundle, import a bundle as a new family (``longhaul.domain.bundle``).

Export reads what the caller owns: the trace (checked like every route), its local
sub-traces (the family walk of :mod:`longhaul.gateway.usecases.erase`), their logs and the
workspace values they own — stored outputs, uploads, attachments, the images their messages
show and the recorded contexts (prompt and tool schemas) their runs were shown — which are
the places :mod:`longhaul.core.erasure` lists, less what is not the trace's own (snapshots and the
index are rebuilt from the log; leases are the executors').

Import checks the bundle (format, version, shape, every event decodes and belongs to its
trace), gives it fresh ids and the importer as owner, folds each new log to be sure it reads
back without a fault, stores the files under the new ids (images under the importer's key),
then asks an executor to write the logs (``longhaul.domain.imports``). It can never write
into another key's data: every id is new, and the owner is the caller.

It stores only what the delete of its traces removes again: the files under their ids, a
recorded context under each trace whose log names it (``context/<trace>/<sha256>``), the
images their messages show; a file the logs do not name is not stored. Every byte stored is
charged to the importer's upload quota (``gateway.upload_quota_bytes_per_key``). An import
no executor wrote (refused, or none there to answer) removes what it stored and gives the
charge back.
"""

from __future__ import annotations

import time

import msgspec
import nats.errors
from longhaul.agent.images import image_key
from longhaul.agent.run_context import context_key, context_keys
from longhaul.domain import events as ev
from longhaul.domain.bundle import (
    Bundle,
    BundleError,
    BundleFile,
    BundleTrace,
    FileKind,
    Reidentified,
    reidentify,
    upgrade,
)
from longhaul.domain.imports import ImportedTrace, ImportReply, ImportRequest
from longhaul.domain.state import TraceState
from longhaul.domain.state.fold import apply_or_skip
from longhaul.gateway import access
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import RETRY, Runtime
from longhaul.gateway.storage import require_room
from longhaul.gateway.usecases.erase import family_of, images_named
from longhaul.gateway.usecases.files import charge

IMPORT_TIMEOUT_S = 30.0
OWNED_KINDS: tuple[FileKind, ...] = ("outputs", "uploads", "trace")


async def export_family(runtime: Runtime, principal: Principal, trace_id: str) -> bytes:
    root = await access.owned_trace(runtime, principal, trace_id)
    async with runtime.nats_call():
        members = await family_of(runtime, root)
        logs = {m.trace_id: await _log(runtime, m.trace_id) for m in members}
        contexts = {t: _contexts_named(log) for t, log in logs.items()}
        files = await _files(runtime, principal.owner, members, contexts)
    traces = [
        BundleTrace(trace_id=t, events=[msgspec.Raw(ev.encode(e)) for e in log])
        for t, log in logs.items()
    ]
    bundle = Bundle(exported_at=time.time(), root=root.trace_id, traces=traces, files=files)
    return msgspec.json.encode(bundle)


async def _log(runtime: Runtime, trace_id: str) -> list[ev.Event]:
    """The trace's events as stored (an event the fold skips as a fault is left out)."""
    return [recorded.event async for recorded in runtime.traces.replay(trace_id)]


def _contexts_named(log: list[ev.Event]) -> set[str]:
    return {e.hash for e in log if isinstance(e, ev.ContextRecorded)}


async def _files(
    runtime: Runtime, owner: str | None, members: list[TraceState], contexts: dict[str, set[str]]
) -> list[BundleFile]:
    workspace = runtime.service.workspace
    files = []
    for member in members:
        for kind in OWNED_KINDS:
            for key in await workspace.keys_under(f"{kind}/{member.trace_id}"):
                entry = await workspace.get(key)
                if entry is not None:
                    files.append(BundleFile(kind=kind, key=key, data=entry.value))
    for digest in sorted(images_named(members)):
        entry = await workspace.get(image_key(owner, digest))
        if entry is not None:
            files.append(BundleFile(kind="images", key=digest, data=entry.value))
    found: dict[str, bytes] = {}
    for trace_id, digests in contexts.items():
        for digest in sorted(digests - set(found)):
            for key in context_keys(trace_id, digest):
                entry = await workspace.get(key)
                if entry is not None:
                    found[digest] = entry.value
                    break
    files += [BundleFile(kind="context", key=d, data=data) for d, data in sorted(found.items())]
    return files


async def import_bundle(runtime: Runtime, principal: Principal, raw: bytes) -> dict[str, object]:
    try:
        fresh = reidentify(upgrade(raw), principal.owner)
        folded = [_folded(trace_id, events) for trace_id, events in fresh.traces]
    except BundleError as exc:
        raise ApiError(422, "invalid_bundle", str(exc)) from exc
    await require_room(runtime)
    request = msgspec.json.encode(
        ImportRequest(
            owner=principal.owner,
            traces=[
                ImportedTrace(trace_id=t, events=[msgspec.Raw(ev.encode(e)) for e in events])
                for t, events in fresh.traces
            ],
        )
    )
    conn = runtime.service.conn
    if len(request) > conn.nc.max_payload:
        raise ApiError(
            413,
            "bundle_too_large",
            f"the bundle's logs take {len(request)} bytes; one import carries at most "
            f"{conn.nc.max_payload} (the NATS server's max_payload)",
        )
    async with runtime.nats_call():
        stored = await _to_store(runtime, principal.owner, fresh, folded)
        size = sum(len(data) for data in stored.values())
        if size:  # what an import stores is the importer's: the per-key quota holds
            await charge(runtime, principal.owner, size)
        try:
            for key, data in stored.items():
                await runtime.service.workspace.put(key, data)
        except BaseException:
            await _undo(runtime, principal.owner, stored, size)
            raise
    try:
        reply = await _written_by_an_executor(runtime, request)
    except NoExecutor:
        await _undo(runtime, principal.owner, stored, size)
        raise
    if reply.error is not None:
        await _undo(runtime, principal.owner, stored, size)
        raise ApiError(422, "invalid_bundle", f"the import was refused: {reply.error}")
    return {
        "trace_id": fresh.root,
        "traces": dict(fresh.ids),
        "status": folded[0].status,
    }


def _folded(trace_id: str, events: list[ev.Event]) -> TraceState:
    """The new log must read back whole: a fault here would be a bundle the fold refuses."""
    state = TraceState()
    for seq, event in enumerate(events, start=1):
        apply_or_skip(state, event, seq)
    if state.faults:
        fault = state.faults[0]
        raise BundleError(f"trace {trace_id}: event {fault.type} does not apply: {fault.error}")
    return state


async def _to_store(
    runtime: Runtime, owner: str, fresh: Reidentified, folded: list[TraceState]
) -> dict[str, bytes]:
    """Workspace key → bytes of what the import stores: only what the delete of its traces
    removes (an image the key holds already is not stored again, nor later removed by a
    refused import)."""
    stored = {f.key: f.data for f in fresh.files if f.kind in OWNED_KINDS}
    by_digest = {(f.kind, f.key): f.data for f in fresh.files if f.kind in ("images", "context")}
    for trace_id, events in fresh.traces:
        for digest in _contexts_named(events):
            data = by_digest.get(("context", digest))
            if data is not None:
                stored[context_key(trace_id, digest)] = data
    for digest in images_named(folded):
        data = by_digest.get(("images", digest))
        key = image_key(owner, digest)
        if data is not None and await runtime.service.workspace.get(key) is None:
            stored[key] = data
    return stored


async def _undo(runtime: Runtime, owner: str, stored: dict[str, bytes], size: int) -> None:
    """An import no executor wrote: remove what it stored, give its charge back."""
    async with runtime.nats_call():
        await runtime.service.eraser.erase_workspace(stored)
        if size:
            await charge(runtime, owner, -size)


class NoExecutor(ApiError):
    """No executor took the import: nothing of it is written."""


async def _written_by_an_executor(runtime: Runtime, request: bytes) -> ImportReply:
    conn = runtime.service.conn
    try:
        answer = await conn.nc.request(conn.names.imports, request, timeout=IMPORT_TIMEOUT_S)
    except nats.errors.NoRespondersError as exc:
        raise NoExecutor(
            503, "unavailable", "no executor answered the import; try again", headers=RETRY
        ) from exc
    except nats.errors.TimeoutError as exc:  # one may still write it: its files stay
        raise ApiError(
            503, "unavailable", "no executor answered the import in time", headers=RETRY
        ) from exc
    return msgspec.json.decode(answer.data, type=ImportReply)
