"""Trace bundles: `GET /api/traces/{id}/export`, `POST /api/traces/import`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.usecases import bundles
from pydantic import BaseModel

router = APIRouter(prefix="/api/traces", tags=["traces"], responses=ERROR_RESPONSES)

BUNDLE_TYPE = "application/vnd.longhaul.trace-bundle+json"


class Imported(BaseModel):
    trace_id: str
    """The new id of the bundle's root."""
    traces: dict[str, str]
    """Each trace of the bundle: its id there → its new id here."""
    status: str | None


@router.get(
    "/{trace_id}/export",
    summary="The trace and its sub-traces as one versioned bundle",
    responses={200: {"content": {BUNDLE_TYPE: {}}}},
)
async def export_trace(
    trace_id: str, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Response:
    """Events of the trace and its local sub-traces, with their stored outputs, uploads,
    attachments and images: everything ``POST /api/traces/import`` needs to recreate it."""
    body = await bundles.export_family(runtime, principal, trace_id)
    disposition = f'attachment; filename="{trace_id}.longhaul.json"'
    return Response(body, media_type=BUNDLE_TYPE, headers={"Content-Disposition": disposition})


@router.post(
    "/import",
    status_code=201,
    summary="Recreate an exported trace family under this key, with new ids",
)
async def import_trace(
    request: Request, runtime: CurrentRuntime, principal: CurrentPrincipal
) -> Imported:
    """The body is a bundle (any version this longhaul reads; at most
    ``gateway.max_upload_bytes``). 422 ``invalid_bundle`` says what is wrong with one."""
    raw = await request.body()
    imported = await bundles.import_bundle(runtime, principal, raw)
    return Imported.model_validate(imported)
