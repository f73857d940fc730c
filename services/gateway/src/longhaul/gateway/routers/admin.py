"""``/api/admin``: the operator's routes, which act on every API key's data.

Guarded by ``gateway.admin_keys`` (``auth.administrator``), never a tenant's key: a client
key is refused like any unknown key (401), as on ``/metrics``.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from longhaul.gateway import access, revocation
from longhaul.gateway.auth import administrator
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.schemas.traces import KeyErased, KeyHoldingsList
from longhaul.gateway.usecases import erase

router = APIRouter(
    prefix="/api/admin",
    tags=["admin"],
    responses=ERROR_RESPONSES,
    dependencies=[Depends(administrator)],
)


@router.get(
    "/keys",
    summary="Every owner with what it holds: the configured keys and the revoked ones",
)
async def list_keys(runtime: CurrentRuntime) -> KeyHoldingsList:
    """A revoked key (``configured: false``: removed from ``gateway.api_keys``) is listed
    while anything of it is left, for the operator to erase or to hand back."""
    return KeyHoldingsList(keys=await revocation.holdings(runtime, runtime.schedule_store))


@router.delete(
    "/keys/{owner}/data",
    summary="Erase every trace, task, experience, upload and image of one API key",
)
async def erase_key(owner: str, runtime: CurrentRuntime) -> KeyErased:
    """``owner`` is the key's owner id (``k_…``, ``GET /api/info`` shows it to the key's
    holder; ``local`` on a keyless gateway). The key itself stays valid: its next request
    starts from nothing. A task still planning or running is left, named in ``skipped``."""
    access.checked_id("key", owner)
    return KeyErased.model_validate(await erase.erase_key(runtime, owner))
