"""Which failures are the provider's (a fallback model may answer) and which the request's,
as the real APIs send them (loopback fakes of their wire formats)."""

from __future__ import annotations

import socket

import pytest
from longhaul.llm import ModelRegistry, ModelRequest
from longhaul.llm.fallback import chain_after, outage_reason
from longhaul.llm.types import ModelError

from tests.support.llm_fakes import Break, Fail, FakeAnthropic, FakeOpenAI, Step
from tests.unit.llm.conftest import SleepRecorder


def request() -> ModelRequest:
    return ModelRequest(model="x", messages=[{"role": "user", "content": "hi"}])


async def failure(server: FakeOpenAI | FakeAnthropic, registry: ModelRegistry) -> ModelError:
    model = registry.resolve(f"{server.provider}:fake-model", server.models_config(max_retries=2))
    SleepRecorder().install(model)
    with pytest.raises(ModelError) as caught:
        await model.complete(request())
    return caught.value


@pytest.mark.parametrize(
    ("step", "reason", "attempts"),
    [
        (Fail(503, "overloaded"), "server_error", 3),
        (Fail(500, "boom"), "server_error", 3),
        (Fail(504, "gateway timeout"), "timeout", 3),
        (Fail(429, "slow down"), "rate_limited", 3),
        # a wait past max_retry_after_s (60 s) is an outage at once, not an hour's sleep
        (Fail(429, "slow down", headers={"retry-after": "3600"}), "rate_limited", 1),
        # quota and billing do not pass with time: never retried
        (Fail(429, "You exceeded your current quota (insufficient_quota)"), "quota", 1),
        (Fail(402, "payment required"), "quota", 1),
        # Gemini's words for a per-minute rate limit: retried like any 429
        (
            Fail(429, "Quota exceeded for metric: generate_content_requests per minute"),
            "rate_limited",
            3,
        ),
        (Break(mode="error_event"), "server_error", 1),
    ],
)
async def test_openai_outages_fall_through(
    step: Step, reason: str, attempts: int, registry: ModelRegistry
) -> None:
    async with FakeOpenAI(default=step) as server:
        error = await failure(server, registry)
    assert outage_reason(error) == reason
    assert len(server.requests) == attempts


async def test_anthropic_billing_refusal_is_an_outage_not_a_bad_request(
    registry: ModelRegistry,
) -> None:
    """Anthropic answers a used-up balance with a 400: it still falls through."""
    billing = Fail(400, "Your credit balance is too low to access the Anthropic API.")
    async with FakeAnthropic(default=billing) as server:
        error = await failure(server, registry)
    assert (error.status, outage_reason(error)) == (400, "quota")
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_the_requests_own_fault_does_not_fall_through(
    status: int, registry: ModelRegistry
) -> None:
    async with FakeOpenAI(default=Fail(status, "messages[0]: invalid content")) as server:
        error = await failure(server, registry)
    assert outage_reason(error) is None
    assert len(server.requests) == 1


async def test_a_refused_connection_is_an_outage(registry: ModelRegistry) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    async with FakeOpenAI() as server:
        config = server.models_config(max_retries=1)
        config.providers["openai"].base_url = f"http://127.0.0.1:{port}/v1"
        model = registry.resolve("openai:fake-model", config)
        SleepRecorder().install(model)
        with pytest.raises(ModelError) as caught:
            await model.complete(request())
    assert outage_reason(caught.value) == "connect"


def test_the_chain_goes_on_after_the_current_model() -> None:
    chain = ["openai:a", "anthropic:b", "local:c"]
    assert chain_after(chain, "openai:a") == ["anthropic:b", "local:c"]
    assert chain_after(chain, "anthropic:b") == ["local:c"]
    assert chain_after(chain, "local:c") == []
    # a model outside the chain (a run's own choice) still has the chain's fallbacks
    assert chain_after(chain, "gemini:z") == ["anthropic:b", "local:c"]
    assert chain_after(["openai:a", "openai:a"], "openai:a") == []
