"""Fallback chains: a provider outage moves the trace to the next model instead of failing it.

Before a call that has somewhere to fall back to, the deployment's circuit breaker
(``AgentEnv.breaker``) may skip a provider known to be down, without calling it. A failed
call whose error is the provider's (``longhaul.llm.fallback.outage_reason``) is counted
against its circuit and, with a model left in the chain, recorded as ``model_switched``; the
step is then built again for the new model, so its ``before_model`` hooks (compaction to the
new model's context window among them) see the model that will answer. The conversation
moves as it is: the provider codecs already translate a history from any provider.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from longhaul.agent.contract import LiveUpdate
from longhaul.agent.turn import Turn
from longhaul.domain import events as ev
from longhaul.llm.fallback import CIRCUIT_OPEN, outage_reason, provider_of, shared_provider
from longhaul.llm.types import ModelError, ModelResponse, RetryNotice


async def guarded(turn: Turn, call: Callable[[], Awaitable[ModelResponse]]) -> ModelResponse:
    """``call()`` under the breaker: skipped (``ModelError`` with ``outage="circuit_open"``)
    while the provider's circuit is open and a fallback is left; outages and successes
    reported. Without a fallback the call is always made: failing at once helps no one. A
    process-local model (scripted, replay, local) has no shared circuit."""
    breaker = turn.env.breaker
    provider = provider_of(turn.model.name)
    if breaker is None or not shared_provider(provider):
        return await call()
    if turn.fallback and not await breaker.allow(provider):
        raise ModelError(f"{provider}: circuit open, not called", outage=CIRCUIT_OPEN)
    try:
        response = await call()
    except ModelError as exc:
        if outage_reason(exc) is not None:
            await breaker.failed(provider)
        raise
    await breaker.succeeded(provider)
    return response


async def attempt_failed(turn: Turn, notice: RetryNotice) -> None:
    """A failed attempt the provider retries counts against its circuit at once, so an outage
    opens it after ``failures`` attempts across the deployment, not after every running trace
    has used up its retries. With a fallback left and the circuit now open, the call ends here
    (``circuit_open``) and the turn moves on instead of retrying a provider known down."""
    breaker = turn.env.breaker
    provider = provider_of(turn.model.name)
    if notice.outage is None or breaker is None or not shared_provider(provider):
        return
    await breaker.failed(provider)
    if turn.fallback and not await breaker.allow(provider):
        raise ModelError(
            f"{provider}: circuit open after attempt {notice.attempt} ({notice.reason})",
            outage=CIRCUIT_OPEN,
        )


async def switch_model(turn: Turn, error: ModelError) -> bool:
    """Move the turn to its next model after ``error``; ``False`` when the error does not fall
    through (the request's own fault) or the chain is used up."""
    reason = outage_reason(error)
    if reason is None or not turn.fallback:
        return False
    to = turn.fallback.pop(0)
    switched = ev.ModelSwitched(
        from_model=turn.model.name, to=to.name, reason=reason, error=str(error)[:500]
    )
    await turn.emit([switched])
    turn.model = to
    text = f"{switched.from_model} → {to.name}"
    await turn.notify(LiveUpdate(kind="switch", text=text, reason=reason))
    return True
