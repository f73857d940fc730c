"""The design's three token savings, as tests: the token bench's deterministic workloads
(``bench/bench_tokens.py``: scripted agents through the real engine, tools and fold), counted
with the packaged model's tokenizer on the real llama.cpp server and priced by the providers'
cache rules. Token counts, never times: a change that breaks a saving fails here.

- loop detection: ≥ 30 % fewer input tokens on the looping workload, which then succeeds;
- offloading + compaction: ≥ 50 % fewer input tokens on the long task, every fact still found;
- prompt caching: ≥ 50 % lower effective input cost on the conversation (OpenAI's and
  Anthropic's rules).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from bench.bench_tokens import CONFIGS, Outcome, Tokenizer, measure
from tests.support.llama import LlamaProcess

pytestmark = pytest.mark.real_model


@pytest.fixture
async def tokenizer(llama: LlamaProcess) -> AsyncIterator[Tokenizer]:
    async with httpx.AsyncClient(base_url=llama.url, timeout=120) as client:
        yield Tokenizer(client)


async def outcomes(tokenizer: Tokenizer, workload: str, *configs: str) -> list[Outcome]:
    """The workload under ``configs`` (the bench's quick sizes)."""
    return [
        await measure(tokenizer, workload, config, CONFIGS[config], quick=True)
        for config in configs
    ]


async def test_loop_detection_saves_at_least_30_percent_of_the_loops_tokens(
    tokenizer: Tokenizer,
) -> None:
    naive, detected = await outcomes(tokenizer, "loop", "naive", "loop only")
    assert not naive.run.success, naive.run.detail  # without it, the loop never ends well
    assert detected.run.success, detected.run.detail
    assert detected.priced.input <= 0.70 * naive.priced.input, (
        detected.priced.input,
        naive.priced.input,
    )


async def test_offloading_and_compaction_halve_the_long_tasks_input_tokens(
    tokenizer: Tokenizer,
) -> None:
    naive, saving = await outcomes(tokenizer, "long task", "naive", "all on")
    assert naive.run.success, naive.run.detail
    assert saving.run.success, saving.run.detail  # every fact still reaches the answer
    assert saving.priced.input <= 0.50 * naive.priced.input, (
        saving.priced.input,
        naive.priced.input,
    )


async def test_prompt_caching_halves_the_conversations_input_cost(tokenizer: Tokenizer) -> None:
    naive, cached = await outcomes(tokenizer, "conversation", "naive", "caching only")
    assert naive.run.success and cached.run.success, (naive.run.detail, cached.run.detail)
    for provider in ("openai_cost", "anthropic_cost"):
        ratio = getattr(cached.priced, provider) / getattr(naive.priced, provider)
        assert ratio <= 0.50, (provider, ratio)
