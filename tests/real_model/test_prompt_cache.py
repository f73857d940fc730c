"""Prompts built for caching, on the real llama.cpp server: a run's second request, a minute
after the first (clock injected, no sleep), reuses the whole stable prefix from the server's
prompt cache (its ``cached_tokens``), and the volatile note is never part of it."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import chain, repeat
from pathlib import Path

import httpx
import pytest
from longhaul.domain import events as ev
from longhaul.llm import ModelRegistry

from tests.real_model.conftest import real_models
from tests.support.llama import LlamaProcess, SteeringProxy
from tests.unit.agent.support import MemorySink, make_engine, new_state

pytestmark = pytest.mark.real_model

BEFORE = datetime(2030, 1, 2, 12, 0, 50, tzinfo=UTC)
AFTER = datetime(2030, 1, 2, 12, 1, 10, tzinfo=UTC)


async def test_the_stable_prefix_is_reused_by_llama_cpp_across_a_minute_boundary(
    tmp_path: Path, llama: LlamaProcess, proxy: SteeringProxy
) -> None:
    # the first request before the minute boundary, every later one after it (the model may
    # take more than two steps)
    clock = chain([BEFORE], repeat(AFTER))
    config = ev.TraceConfig(
        system_prompt="You list files.",
        tools=["glob"],
        model_params=ev.ModelParams(temperature=0, seed=1, max_tokens=48),
    )
    state = new_state("List the files here.", config=config)
    before = len(proxy.seen)
    async with ModelRegistry(real_models(proxy, steer_rounds=1), env={}) as registry:
        model = registry.resolve("openai:smollm2")
        engine = make_engine(tmp_path, now=lambda: next(clock))
        await engine.run_turn(state, MemorySink(state), model=model)
    first, second = (seen.body for seen in proxy.seen[before : before + 2])
    assert first["messages"][:2] == second["messages"][:2]  # system and task, byte for byte
    assert first["messages"][-2]["content"].startswith("<context>\nCurrent time: 2030-01-02 12:00")
    # the stable prefix (tools, system, task) in the model's own tokens
    async with httpx.AsyncClient(base_url=llama.url, timeout=30) as client:
        rendered = await client.post(
            "/apply-template",
            json={"messages": first["messages"][:2], "tools": first["tools"]},
        )
        prompt = rendered.json()["prompt"].removesuffix("<|im_start|>assistant\n")
        tokens = (await client.post("/tokenize", json={"content": prompt})).json()["tokens"]
    answers = [state.messages[seq] for seq in state.path if state.messages[seq].role == "assistant"]
    assert len(answers) >= 2 and answers[1].usage is not None
    assert answers[1].usage.cache_read_tokens >= len(tokens) > 100
