"""Export a trace family as a bundle, import a bundle as a new family (``longhaul.domain.bundle``).

Export reads what the caller owns: the trace (checked like every route), its local sub-traces
(the family walk of :mod:`longhaul.gateway.erase`), their logs and the workspace values they
own — stored outputs, uploads, attachments, the images their messages show and the recorded
contexts (prompt and tool schemas) their runs were shown — which are the
places :mod:`longhaul.core.erasure` lists, less what is not the trace's own (snapshots and the
index are rebuilt from the log; leases are the executors').

Import checks the bundle (format, version, shape, every event decodes and belongs to its
trace), gives it fresh ids and the importer as owner, folds each new log to be sure it reads
back without a fault, stores the files under the new ids (images under the importer's key),
then asks an executor to write the logs (``longhaul.domain.imports``). It can never write
into another key's data: every id is new, and the owner is the caller.
"""

from __future__ import annotations

import time

import msgspec
import nats.errors
from longhaul.agent.images import image_key
from longhaul.agent.run_context import context_key
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
from longhaul.gateway.erase import family_of, images_named
from longhaul.gateway.errors import ApiError
from longhaul.gateway.routers.files import charge
from longhaul.gateway.runtime import RETRY, Runtime
from longhaul.gateway.storage import require_room

IMPORT_TIMEOUT_S = 30.0
OWNED_KINDS: tuple[FileKind, ...] = ("outputs", "uploads", "trace")


async def export_family(runtime: Runtime, principal: Principal, trace_id: str) -> bytes:
    root = await access.owned_trace(runtime, principal, trace_id)
    async with runtime.nats_call():
        members = await family_of(runtime, root)
        logs = {m.trace_id: await _log(runtime, m.trace_id) for m in members}
        contexts = {
            e.hash for log in logs.values() for e in log if isinstance(e, ev.ContextRecorded)
        }
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


async def _files(
    runtime: Runtime, owner: str | None, members: list[TraceState], contexts: set[str]
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
    for digest in sorted(contexts):
        entry = await workspace.get(context_key(digest))
        if entry is not None:
            files.append(BundleFile(kind="context", key=digest, data=entry.value))
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
    uploaded = sum(len(file.data) for file in fresh.files if file.kind == "uploads")
    async with runtime.nats_call():
        if uploaded:  # a bundle's uploads are the importer's: the per-key quota holds
            await charge(runtime, principal.owner, uploaded)
        await _store_files(runtime, principal.owner, fresh)
    reply = await _written_by_an_executor(runtime, request)
    if reply.error is not None:
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


async def _store_files(runtime: Runtime, owner: str | None, fresh: Reidentified) -> None:
    workspace = runtime.service.workspace
    for file in fresh.files:
        if file.kind == "context":  # shared by content: written once, never replaced
            if await workspace.get(context_key(file.key)) is None:
                await workspace.put(context_key(file.key), file.data)
            continue
        key = image_key(owner, file.key) if file.kind == "images" else file.key
        await workspace.put(key, file.data)


async def _written_by_an_executor(runtime: Runtime, request: bytes) -> ImportReply:
    conn = runtime.service.conn
    try:
        answer = await conn.nc.request(conn.names.imports, request, timeout=IMPORT_TIMEOUT_S)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
        raise ApiError(
            503, "unavailable", "no executor answered the import; try again", headers=RETRY
        ) from exc
    return msgspec.json.decode(answer.data, type=ImportReply)
