"""PromptCache: a stable system prompt (cacheable) and volatile context after the conversation."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from longhaul.agent import Middleware, Turn, default_middleware
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig, PromptCacheConfig
from longhaul.llm import ModelRegistry

from tests.support.llm_fakes import Call, FakeAnthropic, FakeOpenAI, Reply
from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
)

NOON = datetime(2030, 1, 2, 12, 0, tzinfo=UTC)


class Remember(Middleware):
    async def before_agent(self, turn: Turn) -> None:
        turn.memory.append("Recalled: the user prefers tabs.")


async def test_stable_prefix_is_identical_across_steps_and_volatile_comes_last(
    tmp_path: Path,
) -> None:
    model, script = scripted(calls(call("glob", {"pattern": "*"})), answer("ok"))
    state = new_state(config=ev.TraceConfig(system_prompt="You are terse."))
    engine = make_engine(tmp_path, middleware=[*default_middleware(), Remember()], now=lambda: NOON)
    await engine.run_turn(state, MemorySink(state), model=model)
    first, second = script.requests
    assert first.system_stable == second.system_stable
    assert first.system_stable.startswith("You are terse.")
    assert str(tmp_path) in first.system_stable
    assert first.cache_system is True
    assert first.system_volatile == (
        "Current time: 2030-01-02 12:00 UTC\n\nRecalled: the user prefers tabs."
    )


async def test_disabled_cache_sends_one_uncached_block(tmp_path: Path) -> None:
    config = PipelineConfig(prompt_cache=PromptCacheConfig(enable=False))
    model, script = scripted(answer("ok"))
    state = new_state()
    await make_engine(tmp_path, config=config, now=lambda: NOON).run_turn(
        state, MemorySink(state), model=model
    )
    [request] = script.requests
    assert request.cache_system is False and request.system_volatile == ""
    assert request.system_stable.endswith("Current time: 2030-01-02 12:00 UTC")


async def test_the_wire_prefix_survives_a_minute_boundary_and_the_note_comes_last(
    tmp_path: Path,
) -> None:
    """Two steps a minute apart (12:59 then 13:00 would change the hour; 12:00 → 12:01 must
    not change a byte of the cached prefix): on the OpenAI wire the system message and every
    earlier message are identical, and the volatile note is the last message."""
    clock = iter([NOON, NOON.replace(minute=1)])
    script = [Reply(tool_calls=[Call("glob", {"pattern": "*"})])]
    async with FakeOpenAI(script=script, default=Reply(text="done")) as fake:
        registry = ModelRegistry(fake.models_config())
        model = registry.resolve("openai:fake-model")
        state = new_state(config=ev.TraceConfig(system_prompt="You are terse."))
        engine = make_engine(tmp_path, now=lambda: next(clock))
        await engine.run_turn(state, MemorySink(state), model=model)
        await registry.aclose()
    first, second = (r.json for r in fake.requests)
    assert second["messages"][: len(first["messages"]) - 1] == first["messages"][:-1]
    assert first["messages"][-1] == {
        "role": "user",
        "content": "<context>\nCurrent time: 2030-01-02 12:00 UTC\n</context>",
    }
    assert second["messages"][-1] == first["messages"][-1]  # same hour, same note
    assert first["prompt_cache_key"] == second["prompt_cache_key"] == state.trace_id


def _without_marks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks]


def _marked_prefix(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages up to and including its last ``cache_control`` block (what the
    last breakpoint caches), with the marks themselves left out."""
    flat = [
        (index, block)
        for index, message in enumerate(body["messages"])
        for block in message["content"]
    ]
    last = max(n for n, (_, block) in enumerate(flat) if "cache_control" in block)
    return [{"message": index, **_without_marks([block])[0]} for index, block in flat[: last + 1]]


async def test_anthropic_history_breakpoints_roll_and_each_cached_prefix_is_reread(
    tmp_path: Path,
) -> None:
    """Three steps, each a minute later (12:00, 12:01, 12:02) on the strict Anthropic fake:
    tools, system and the last two user turns carry ``cache_control`` (4, the maximum); the
    prefix a request caches at its last breakpoint is byte-identical at the start of the
    next request (so the next one reads it), and the time note comes after every breakpoint."""
    clock = iter([NOON, NOON.replace(minute=1), NOON.replace(minute=2)])
    script = [
        Reply(tool_calls=[Call("glob", {"pattern": "*"})]),
        Reply(tool_calls=[Call("glob", {"pattern": "*.txt"})]),
    ]
    async with FakeAnthropic(script=script, default=Reply(text="done")) as fake:
        registry = ModelRegistry(fake.models_config())
        model = registry.resolve("anthropic:fake-model")
        state = new_state(config=ev.TraceConfig(system_prompt="You are terse."))
        engine = make_engine(tmp_path, now=lambda: next(clock))
        await engine.run_turn(state, MemorySink(state), model=model)
        await registry.aclose()
    bodies = [r.json for r in fake.requests]
    assert len(bodies) == 3 and state.status == "completed"  # the strict fake refused nothing
    for body in bodies:
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        users = [m for m in body["messages"] if m["role"] == "user"]
        marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
        assert len(marked) == min(len(users), 2)
        # the note is the very last block, after every breakpoint, and unmarked
        last = body["messages"][-1]["content"][-1]
        note = "<context>\nCurrent time: 2030-01-02 12:00 UTC\n</context>"
        assert last == {"type": "text", "text": note}
    assert bodies[0]["system"] == bodies[1]["system"] == bodies[2]["system"]
    for earlier, later in itertools.pairwise(bodies):
        cached = _marked_prefix(earlier)
        assert _marked_prefix(later)[: len(cached)] == cached
        assert len(_marked_prefix(later)) > len(cached)  # the breakpoint moved on
