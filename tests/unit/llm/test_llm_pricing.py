"""Price and context-limit tables."""

from __future__ import annotations

import pytest
from longhaul.domain.config import ModelPrice, ModelsConfig
from longhaul.llm import Usage, context_limit, cost, price_for


def test_openai_cost_bills_cached_tokens_at_the_cached_rate() -> None:
    usage = Usage(prompt_tokens=1_000_000, cache_read_tokens=400_000, completion_tokens=100_000)
    # 600k fresh * 2.50 + 400k cached * 1.25 + 100k out * 10.00
    assert cost("openai:gpt-4o-2024-08-06", usage) == pytest.approx(1.5 + 0.5 + 1.0)


def test_anthropic_cost_bills_cache_writes_and_reads_separately() -> None:
    usage = Usage(
        prompt_tokens=1_000_000,
        cache_write_tokens=200_000,
        cache_read_tokens=700_000,
        completion_tokens=10_000,
    )
    # 100k fresh * 3 + 200k write * 3.75 + 700k read * 0.30 + 10k out * 15
    expected = 0.3 + 0.75 + 0.21 + 0.15
    assert cost("anthropic:claude-sonnet-4-5-20250929", usage) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("model", "input_price"),
    [
        ("openai:gpt-4o-mini-2024-07-18", 0.15),
        ("openai:gpt-4o", 2.50),
        ("openai:gpt-4.1-mini", 0.40),
        ("openai:o4-mini", 1.10),
        ("anthropic:claude-3-5-haiku-latest", 0.80),
        ("anthropic:claude-opus-4-1-20250805", 15.00),
        ("anthropic:claude-opus-4-5", 5.00),
        ("gemini:gemini-2.5-flash-lite", 0.10),
        ("gemini:models/gemini-1.5-pro", 1.25),
        ("openai:anthropic/claude-sonnet-4", 3.00),
    ],
)
def test_longest_prefix_wins(model: str, input_price: float) -> None:
    price = price_for(model)
    assert price is not None and price.input == input_price


def test_config_overrides_and_extends_prices() -> None:
    config = ModelsConfig(
        prices={
            "gpt-4o": ModelPrice(input=1, output=2),
            "vllm:llama": ModelPrice(input=0.1, output=0.1),
        }
    )
    assert cost("openai:gpt-4o", Usage(prompt_tokens=10**6), config) == pytest.approx(1.0)
    assert cost("openai:gpt-4o-mini", Usage(prompt_tokens=10**6), config) == pytest.approx(0.15)
    assert cost("vllm:llama-3.1-8b", Usage(completion_tokens=10**6), config) == pytest.approx(0.1)


def test_scripted_and_unknown_models_cost_nothing() -> None:
    usage = Usage(prompt_tokens=10**6, completion_tokens=10**6)
    assert cost("scripted:auto", usage) == 0.0
    assert cost("openai:some-local-model", usage) == 0.0


def test_context_limits() -> None:
    assert context_limit("anthropic:claude-sonnet-4-5") == 200_000
    assert context_limit("gemini:gemini-2.5-pro") == 1_048_576
    assert context_limit("openai:gpt-4.1-mini") == 1_047_576
    assert context_limit("scripted:auto") == 128_000
    assert context_limit("openai:unknown") == 128_000
    config = ModelsConfig(context_limits={"openai:unknown": 8192, "gpt-4o": 64_000})
    assert context_limit("openai:unknown", config) == 8192
    assert context_limit("openai:gpt-4o-mini", config) == 64_000
