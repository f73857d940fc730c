"""What a call cost and how much context a model holds.

Prices are US dollars per million tokens (list prices, standard tier, short-context rates).
Lookup accepts full model strings (``openai:gpt-4o-2024-08-06``), bare names, and
router-style names (``openai:anthropic/claude-sonnet-4``); the longest matching name prefix
wins, so dated snapshots inherit their family's price. ``ModelsConfig.prices`` and
``ModelsConfig.context_limits`` override or extend both tables with the same matching.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TypeVar

from longhaul.domain.config import ModelPrice, ModelsConfig
from longhaul.llm.types import Usage

log = logging.getLogger(__name__)

OFFLINE_PROVIDERS = frozenset({"scripted"})
DEFAULT_CONTEXT_LIMIT = 128_000


def _price(inp: float, cached: float, out: float, write: float | None = None) -> ModelPrice:
    return ModelPrice(input=inp, cached_input=cached, output=out, cache_write=write)


PRICES: dict[str, ModelPrice] = {
    "gpt-4o": _price(2.50, 1.25, 10.00),
    "gpt-4o-mini": _price(0.15, 0.075, 0.60),
    "gpt-4.1": _price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _price(0.10, 0.025, 0.40),
    "o3": _price(2.00, 0.50, 8.00),
    "o3-mini": _price(1.10, 0.55, 4.40),
    "o4-mini": _price(1.10, 0.275, 4.40),
    "claude-3-haiku": _price(0.25, 0.03, 1.25, 0.30),
    "claude-3-5-haiku": _price(0.80, 0.08, 4.00, 1.00),
    "claude-3-5-sonnet": _price(3.00, 0.30, 15.00, 3.75),
    "claude-3-7-sonnet": _price(3.00, 0.30, 15.00, 3.75),
    "claude-sonnet-4": _price(3.00, 0.30, 15.00, 3.75),
    "claude-haiku-4": _price(1.00, 0.10, 5.00, 1.25),
    "claude-3-opus": _price(15.00, 1.50, 75.00, 18.75),
    "claude-opus-4": _price(15.00, 1.50, 75.00, 18.75),
    "claude-opus-4-5": _price(5.00, 0.50, 25.00, 6.25),
    "gemini-1.5-flash": _price(0.075, 0.01875, 0.30),
    "gemini-1.5-pro": _price(1.25, 0.3125, 5.00),
    "gemini-2.0-flash": _price(0.10, 0.025, 0.40),
    "gemini-2.0-flash-lite": _price(0.075, 0.075, 0.30),
    "gemini-2.5-flash": _price(0.30, 0.03, 2.50),
    "gemini-2.5-flash-lite": _price(0.10, 0.01, 0.40),
    "gemini-2.5-pro": _price(1.25, 0.125, 10.00),
}

CONTEXT_LIMITS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-": 200_000,
    "gemini-1.5-flash": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5": 1_048_576,
}

T = TypeVar("T")


def _provider(model_string: str) -> str:
    return model_string.partition(":")[0] if ":" in model_string else ""


def _lookup(model_string: str, overrides: Mapping[str, T], defaults: Mapping[str, T]) -> T | None:
    """Longest-prefix match of the full string, then of the bare and router-less names;
    on equal keys the configuration wins over the defaults."""
    table = {**defaults, **overrides}
    bare = model_string.partition(":")[2] or model_string
    for name in (model_string, bare, bare.rpartition("/")[2]):
        matches = [key for key in table if name.startswith(key)]
        if matches:
            return table[max(matches, key=len)]
    return None


def price_for(model_string: str, config: ModelsConfig | None = None) -> ModelPrice | None:
    overrides = config.prices if config else {}
    return _lookup(model_string, overrides, PRICES)


_unpriced: set[str] = set()


def cost(model_string: str, usage: Usage, config: ModelsConfig | None = None) -> float:
    """US dollars for one call. ``prompt_tokens`` includes cached and cache-written tokens,
    which are billed at their own rates when the table has them."""
    if _provider(model_string) in OFFLINE_PROVIDERS:
        return 0.0
    price = price_for(model_string, config)
    if price is None:
        if model_string not in _unpriced:
            _unpriced.add(model_string)
            log.warning("no price known for %s; counting its cost as 0", model_string)
        return 0.0
    fresh = max(usage.prompt_tokens - usage.cache_read_tokens - usage.cache_write_tokens, 0)
    dollars = (
        fresh * price.input
        + usage.cache_read_tokens
        * (price.cached_input if price.cached_input is not None else price.input)
        + usage.cache_write_tokens
        * (price.cache_write if price.cache_write is not None else price.input)
        + usage.completion_tokens * price.output
    )
    return dollars / 1_000_000


def context_limit(model_string: str, config: ModelsConfig | None = None) -> int:
    """Context window in tokens (``DEFAULT_CONTEXT_LIMIT`` when unknown)."""
    overrides = config.context_limits if config else {}
    found = _lookup(model_string, overrides, CONTEXT_LIMITS)
    return found if found is not None else DEFAULT_CONTEXT_LIMIT
