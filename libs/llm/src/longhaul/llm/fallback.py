"""Which failed model calls move a turn to the next model of its fallback chain, and which model
that is. Pure: the engine asks, the shell's circuit breaker says which providers to skip.

A provider outage falls through (connect errors, timeouts, 5xx, a 429 whose ``Retry-After``
is past the limit, a quota or billing refusal, a stream cut off by the server); a request the
provider refused for its own content (a 400) does not: every model would refuse it too.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from longhaul.llm.types import ModelError

CIRCUIT_OPEN = "circuit_open"
"""The reason of a switch made without calling the provider: its circuit is open."""

OUTAGE_REASONS = frozenset({"connect", "timeout", "server_error", "rate_limited", "quota"})
SWITCH_REASONS = OUTAGE_REASONS | {CIRCUIT_OPEN}
"""Every ``model_switched`` reason (a bounded metric label)."""


def outage_reason(error: ModelError) -> str | None:
    """Why ``error`` is the provider's failure (``connect``, ``timeout``, ``server_error``,
    ``rate_limited``, ``quota``), or ``None`` when the request itself was at fault."""
    if error.outage is not None:
        return error.outage
    return "server_error" if error.retryable else None


def provider_of(model_string: str) -> str:
    """``openai`` of ``openai:gpt-4o``: the unit a circuit breaker counts failures by."""
    return model_string.partition(":")[0]


PROCESS_LOCAL = frozenset({"scripted", "replay", "local"})
"""Providers that are no shared service (a script, a recording, each executor's own llama.cpp
server): the deployment's circuit breaker does not count them."""


def shared_provider(provider: str) -> bool:
    return provider not in PROCESS_LOCAL


def chain_after(chain: Sequence[str], current: str) -> list[str]:
    """The models to try after ``current``: those after it in ``chain`` (all of the chain's
    fallbacks when ``current`` is not in it), never ``current`` itself."""
    rest = list(chain[chain.index(current) + 1 :] if current in chain else chain[1:])
    return [model for model in rest if model != current]


def next_model(candidates: Sequence[str], skip: Container[str] = ()) -> str | None:
    """The first of ``candidates`` whose provider is not in ``skip`` (open circuits)."""
    for model in candidates:
        if provider_of(model) not in skip:
            return model
    return None
