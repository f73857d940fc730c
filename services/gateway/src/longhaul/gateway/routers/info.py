"""``/api/info``: what a client should know about this gateway before it submits work."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter
from longhaul.domain.offline import offline_notice
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.deps import CurrentRuntime
from longhaul.gateway.errors import ERROR_RESPONSES
from pydantic import BaseModel, Field

router = APIRouter(prefix="/api", tags=["info"], responses=ERROR_RESPONSES)


class Info(BaseModel):
    version: str
    owner: str = Field(description="the owner id your key files traces under")
    default_model: str
    offline: bool = Field(description="true when the default model is the scripted one")
    notice: str | None = None
    auth: bool = Field(description="false: local development mode without API keys")


@router.get("/info", response_model=Info, summary="Gateway version, default model, auth mode")
async def info(runtime: CurrentRuntime, principal: CurrentPrincipal) -> Info:
    models = runtime.config.models
    return Info(
        version=version("longhaul-gateway"),
        owner=principal.owner,
        default_model=models.default,
        offline=models.is_offline_default,
        notice=offline_notice(models.default) if models.is_offline_default else None,
        auth=not runtime.keys.open,
    )
