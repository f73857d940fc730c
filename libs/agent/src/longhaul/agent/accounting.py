"""Usage and cost of one model call, as recorded on the message it produced."""

from __future__ import annotations

from longhaul.domain.config import ModelsConfig
from longhaul.llm.estimate import estimate_usage
from longhaul.llm.pricing import cost
from longhaul.llm.types import ModelRequest, ModelResponse, Usage


def usage_of(request: ModelRequest, response: ModelResponse) -> Usage:
    """The provider's report, or an estimate (marked) when it reported nothing."""
    return response.usage if response.usage != Usage() else estimate_usage(request, response)


def charge(
    model: str, request: ModelRequest, response: ModelResponse, models: ModelsConfig | None
) -> tuple[Usage, float]:
    """``(usage, cost)`` of one call, ready for ``MessageAppended``."""
    usage = usage_of(request, response)
    return usage, cost(response.model or model, usage, models)
