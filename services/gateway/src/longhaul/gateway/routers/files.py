"""``POST /api/traces/{id}/files``: put files in a trace's working directory.

The bytes go to the workspace (KV, large ones to the object store) under their digest and a
``file_uploaded`` event per file goes on the trace (a name sent twice: the last wins); the
executor writes them into the working directory and tells the model before its next call.
Names are plain file names (no paths, no leading dot); a request is bounded by
``gateway.max_upload_bytes`` and a key's total by ``gateway.upload_quota_bytes_per_key``; a
refused request writes nothing. The body is read only once the key is known and owns the trace
(not a ``File`` parameter, which FastAPI would parse before any dependency runs).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from longhaul.domain.state.uploads import MAX_PENDING_UPLOADS
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime, OwnedTrace
from longhaul.gateway.errors import ERROR_RESPONSES, ApiError
from longhaul.gateway.usecases.files import checked_name, put_files
from pydantic import BaseModel
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException

router = APIRouter(prefix="/api/traces", tags=["traces"], responses=ERROR_RESPONSES)

MAX_FILES = 20
MAX_FIELDS = 10

UPLOAD_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["files"],
                "properties": {
                    "files": {
                        "type": "array",
                        "items": {"type": "string", "format": "binary"},
                        "minItems": 1,
                        "maxItems": MAX_FILES,
                        "description": "one or more files",
                    }
                },
            }
        }
    },
}


class UploadedFile(BaseModel):
    name: str
    size: int
    sha256: str


class FilesAccepted(BaseModel):
    trace_id: str
    files: list[UploadedFile]
    event_id: int


async def _files(request: Request) -> list[UploadFile]:
    """The ``files`` parts of the multipart body, read now (after authentication)."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError(415, "unsupported_media_type", "send the files as multipart/form-data")
    try:
        form = await request.form(max_files=MAX_FILES + 1, max_fields=MAX_FIELDS)
    except MultiPartException as exc:
        raise ApiError(400, "bad_request", f"malformed multipart body: {exc.message}") from None
    return [part for part in form.getlist("files") if isinstance(part, UploadFile)]


@router.post(
    "/{trace_id}/files",
    status_code=202,
    summary="Upload files into the trace's working directory (multipart field 'files')",
    openapi_extra={"requestBody": UPLOAD_BODY},
)
async def upload_files(
    state: OwnedTrace, request: Request, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> FilesAccepted:
    trace_id = state.trace_id
    files = await _files(request)
    if not files or len(files) > MAX_FILES:
        raise ApiError(422, "invalid_request", f"send 1 to {MAX_FILES} files")
    if len(state.uploads_pending) + len(files) > MAX_PENDING_UPLOADS:
        raise ApiError(
            409,
            "conflict",
            f"the trace already holds {len(state.uploads_pending)} files for its next turn "
            f"(at most {MAX_PENDING_UPLOADS}): let it run first",
        )
    contents = [
        (
            checked_name(upload.filename or ""),
            await upload.read(),
            upload.content_type or "application/octet-stream",
        )
        for upload in files
    ]
    uploaded, event_id = await put_files(runtime, principal, trace_id, contents)
    return FilesAccepted(
        trace_id=trace_id,
        files=[UploadedFile(name=u.name, size=u.size, sha256=u.sha256) for u in uploaded],
        event_id=event_id,
    )
