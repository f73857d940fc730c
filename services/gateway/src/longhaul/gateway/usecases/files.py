"""Files into a trace's working directory: names checked, bytes kept in the workspace under
their digest and charged to the key's upload quota, one ``file_uploaded`` event per file.

A name sent twice keeps its last; a refused request writes nothing and gives back what it
charged. The ``POST /api/traces/{id}/files`` route, ``/v1``, ``/a2a`` and trace creation all
put files this way.
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import partial

import msgspec
from longhaul.core.workspace import WorkspaceConflict
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState
from longhaul.gateway import commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
QUOTA_ATTEMPTS = 8


def _same(event: ev.FileUploaded, _state: TraceState) -> ev.TraceEvent:
    return event


def checked_name(name: str) -> str:
    if not SAFE_NAME.fullmatch(name) or ".." in name:
        raise ApiError(
            422,
            "invalid_file_name",
            f"file name {name[:64]!r} is not allowed: letters, digits, . _ - only, no path, "
            "not starting with a dot (max 128)",
        )
    return name


async def charge(runtime: Runtime, owner: str, size: int) -> None:
    """Add ``size`` to the key's uploaded bytes (compare-and-set), or 413 over the quota; a
    negative ``size`` gives back what a refused request had charged."""
    quota = runtime.config.gateway.upload_quota_bytes_per_key
    workspace = runtime.service.workspace
    key = f"quota/uploads/{owner}"
    for _ in range(QUOTA_ATTEMPTS):
        entry = await workspace.get(key)
        used = int(entry.value) if entry is not None else 0
        if size > 0 and used + size > quota:
            raise ApiError(
                413,
                "upload_quota_exceeded",
                f"this key has uploaded {used} bytes of its {quota}; this request adds {size}",
                details={"used": used, "quota": quota},
            )
        try:
            await workspace.put(
                key,
                str(max(used + size, 0)).encode(),
                expected_revision=entry.revision if entry else 0,
            )
            return
        except WorkspaceConflict:
            continue
    raise ApiError(409, "concurrent_update", "the upload quota kept changing; retry")


async def store_upload(
    runtime: Runtime, trace_id: str, name: str, data: bytes, media_type: str
) -> ev.FileUploaded:
    """Keep ``data`` in the workspace under its digest; the event that names it."""
    digest = hashlib.sha256(data).hexdigest()
    key = f"uploads/{trace_id}/{digest}"
    await runtime.service.workspace.put(key, data)
    return ev.FileUploaded(name=name, size=len(data), sha256=digest, key=key, media_type=media_type)


async def put_files(
    runtime: Runtime,
    principal: Principal,
    trace_id: str,
    contents: list[tuple[str, bytes, str]],
) -> tuple[list[ev.FileUploaded], int]:
    """Store (name, bytes, media type) files for the trace's next turn, charged to the key's
    quota; returns their events and the last one's sequence."""
    uploaded = await stored(runtime, principal.owner, trace_id, contents)
    event_id = 0
    for event in uploaded:
        _, recorded = await commands.append_to_trace(
            runtime, principal, trace_id, partial(_same, event)
        )
        event_id = recorded.seq
    return uploaded, event_id


async def stored(
    runtime: Runtime, owner: str, trace_id: str, contents: list[tuple[str, bytes, str]]
) -> list[ev.FileUploaded]:
    """Charge (name, bytes, media type) files to the key's upload quota and keep them for
    the trace; the events that name them."""
    if not contents:
        return []
    async with runtime.nats_call():
        await charge(runtime, owner, sum(len(data) for _, data, _ in contents))
        return [
            await store_upload(runtime, trace_id, name, data, media_type)
            for name, data, media_type in contents
        ]


def decoded_files(files: list[tuple[str, str, str | None]]) -> list[tuple[str, bytes, str]]:
    """(name, base64, media type) files of a JSON body as (name, bytes, media type), a name
    sent twice keeping its last; 422 for a bad name or content."""
    contents: dict[str, tuple[bytes, str]] = {}
    for name, content, media_type in files:
        try:
            data = base64.b64decode(content, validate=True)
        except ValueError:  # binascii.Error, and non-ASCII text (which b64decode refuses so)
            raise ApiError(
                422, "invalid_request", f"file {name[:64]!r}: content is not base64"
            ) from None
        contents[checked_name(name)] = (data, media_type or "application/octet-stream")
    return [(name, data, media_type) for name, (data, media_type) in contents.items()]


async def create_with_files(
    runtime: Runtime,
    principal: Principal,
    event: ev.TraceCreated,
    files: list[tuple[str, str, str | None]],
    trace_id: str | None = None,
) -> TraceState:
    """Create the trace with (name, base64, media type) files already in its working
    directory before its first model call; a refused creation keeps none of the key's
    upload quota."""
    contents = decoded_files(files)
    trace_id = trace_id or new_id("t")
    if contents:
        stored_files = await stored(runtime, principal.owner, trace_id, contents)
        event = msgspec.structs.replace(event, files=[*event.files, *stored_files])
    try:
        return await commands.create_trace(runtime, principal, event, trace_id)
    except ApiError:
        if contents:
            await charge(runtime, principal.owner, -sum(len(data) for _, data, _ in contents))
        raise
