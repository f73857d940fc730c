"""Token deltas: throttled by flush_interval_ms, merged pieces equal the text exactly."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from longhaul.agent import LiveUpdate
from longhaul.agent.engine.deltas import DeltaThrottle
from longhaul.domain.config import PipelineConfig, StreamingConfig

from tests.unit.agent.support import (
    FixedClock,
    MemorySink,
    answer,
    call,
    make_engine,
    new_state,
    scripted,
)


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(st.text(max_size=5), max_size=30),
    gaps=st.lists(st.floats(0, 0.1), min_size=30, max_size=30),
    interval=st.sampled_from([0, 10, 50]),
)
async def test_flushed_pieces_join_to_the_original(
    chunks: list[str], gaps: list[float], interval: int
) -> None:
    clock = FixedClock()
    sent: list[str] = []

    async def live(update: LiveUpdate) -> None:
        sent.append(update.text)

    throttle = DeltaThrottle(live, interval, clock)
    for chunk, gap in zip(chunks, gaps, strict=False):
        clock.advance(gap)
        await throttle.push(chunk)
    await throttle.flush()
    assert "".join(sent) == "".join(chunks)
    assert all(sent)
    if interval == 0:
        assert sent == [c for c in chunks if c]


async def test_throttle_merges_within_the_interval() -> None:
    clock = FixedClock()
    sent: list[str] = []

    async def live(update: LiveUpdate) -> None:
        sent.append(update.text)

    throttle = DeltaThrottle(live, 50, clock)
    for text in ("a", "b", "c"):
        clock.advance(0.01)
        await throttle.push(text)
    assert sent == []
    clock.advance(0.03)
    await throttle.push("d")
    assert sent == ["abcd"]
    await throttle.push("e")
    await throttle.flush()
    assert sent == ["abcd", "e"]


async def test_engine_streams_deltas_and_tool_progress(tmp_path: Path) -> None:
    updates: list[LiveUpdate] = []

    async def live(update: LiveUpdate) -> None:
        updates.append(update)

    config = PipelineConfig(streaming=StreamingConfig(flush_interval_ms=0))
    model, _ = scripted(
        {"content": "let me look", "tool_calls": [call("glob", {"pattern": "*"}, id="g1")]},
        answer("the final answer is long enough to need several chunks"),
    )
    state = new_state()
    await make_engine(tmp_path, config=config).run_turn(
        state, MemorySink(state), model=model, live=live
    )
    text = "".join(u.text for u in updates if u.kind == "delta")
    assert text == "let me look" + "the final answer is long enough to need several chunks"
    assert len([u for u in updates if u.kind == "delta"]) > 2
    kinds = [(u.kind, u.tool_call_id) for u in updates if u.kind != "delta"]
    assert kinds == [("tool_start", "g1"), ("tool_end", "g1")]
