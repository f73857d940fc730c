"""The engine's side of fallback chains: which errors move the turn to the next model, the
``model_switched`` event, compaction to the next model's smaller window before it is called,
and the circuit breaker it asks (a fake here; the KV one is tested with NATS)."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent import default_middleware
from longhaul.domain import events as ev
from longhaul.llm.types import ModelError

from tests.unit.agent.support import MemorySink, answer, make_engine, new_state, scripted
from tests.unit.agent.test_summarization import big_state

DOWN = ModelError("openai: HTTP 503: overloaded", status=503, retryable=True, outage="server_error")


class FakeBreaker:
    """Says which providers are open; records what the engine reports."""

    def __init__(self, *open_providers: str) -> None:
        self.open = set(open_providers)
        self.asked: list[str] = []
        self.failures: list[str] = []
        self.successes: list[str] = []

    async def allow(self, provider: str) -> bool:
        self.asked.append(provider)
        return provider not in self.open

    async def failed(self, provider: str) -> None:
        self.failures.append(provider)

    async def succeeded(self, provider: str) -> None:
        self.successes.append(provider)


async def test_an_outage_switches_and_the_smaller_window_is_compacted_first(
    tmp_path: Path,
) -> None:
    """110k tokens fit the primary's 1M window but not 80 % of the fallback's 128k: the
    history is summarised before the fallback is called, never sent to it whole."""
    state, sink = await big_state(110_000)
    primary, primary_script = scripted(DOWN, name="openai:big")
    fallback, fallback_script = scripted(answer("done"), name="anthropic:small")
    utility, _ = scripted(answer("SUMMARY: read a big file"), name="scripted:util")
    limits = {"openai:big": 1_000_000, "anthropic:small": 128_000}
    middleware = default_middleware(context_limit=lambda model: limits[model])
    engine = make_engine(tmp_path, middleware=middleware)
    outcome = await engine.run_turn(
        state, sink, model=primary, utility_model=utility, fallback=[fallback]
    )
    assert outcome.end == "completed"
    [switched] = sink.of_type(ev.ModelSwitched)
    assert (switched.from_model, switched.to, switched.reason) == (
        "openai:big",
        "anthropic:small",
        "server_error",
    )
    assert "503" in (switched.error or "")
    assert len(primary_script.requests) == 1
    assert len(primary_script.requests[0].messages) == 5  # sent whole: it fitted
    types = [type(e) for e in sink.events]
    assert types.index(ev.ModelSwitched) < types.index(ev.Compacted)
    sent = fallback_script.requests[0].messages
    assert "SUMMARY" in sent[1]["content"] and len(str(sent)) < 10_000
    assert state.model == "anthropic:small"
    assert state.messages[state.head_sequence].model == "anthropic:small"


async def test_a_bad_request_fails_the_trace_without_switching(tmp_path: Path) -> None:
    state = new_state("hello")
    sink = MemorySink(state)
    bad = ModelError("openai: HTTP 400: invalid content", status=400)
    primary, _ = scripted(bad, name="openai:a")
    fallback, fallback_script = scripted(answer("never"), name="anthropic:b")
    breaker = FakeBreaker()
    engine = make_engine(tmp_path, breaker=breaker)
    outcome = await engine.run_turn(state, sink, model=primary, fallback=[fallback])
    assert (outcome.end, state.stop_reason) == ("failed", "model_error")
    assert sink.of_type(ev.ModelSwitched) == [] and fallback_script.requests == []
    assert breaker.failures == []  # the request's fault says nothing about the provider


async def test_the_end_of_the_chain_fails_the_trace(tmp_path: Path) -> None:
    state = new_state("hello")
    sink = MemorySink(state)
    primary, _ = scripted(DOWN, name="openai:a")
    fallback, _ = scripted(ModelError("timeout", retryable=True, outage="timeout"), name="x:b")
    breaker = FakeBreaker()
    engine = make_engine(tmp_path, breaker=breaker)
    outcome = await engine.run_turn(state, sink, model=primary, fallback=[fallback])
    assert (outcome.end, state.stop_reason) == ("failed", "model_error")
    assert [(s.to, s.reason) for s in sink.of_type(ev.ModelSwitched)] == [("x:b", "server_error")]
    assert breaker.failures == ["openai", "x"]


async def test_an_open_circuit_is_skipped_without_a_call(tmp_path: Path) -> None:
    state = new_state("hello")
    sink = MemorySink(state)
    primary, primary_script = scripted(answer("never"), name="openai:a")
    fallback, _ = scripted(answer("from b"), name="anthropic:b")
    breaker = FakeBreaker("openai")
    engine = make_engine(tmp_path, breaker=breaker)
    outcome = await engine.run_turn(state, sink, model=primary, fallback=[fallback])
    assert outcome.end == "completed"
    assert primary_script.requests == []
    assert [s.reason for s in sink.of_type(ev.ModelSwitched)] == ["circuit_open"]
    # the last model of a chain is called whatever its circuit says: nowhere else to go
    assert breaker.asked == ["openai"] and breaker.successes == ["anthropic"]


async def test_without_a_fallback_an_open_circuit_is_still_called(tmp_path: Path) -> None:
    state = new_state("hello")
    sink = MemorySink(state)
    primary, primary_script = scripted(answer("answered"), name="openai:a")
    breaker = FakeBreaker("openai")
    engine = make_engine(tmp_path, breaker=breaker)
    outcome = await engine.run_turn(state, sink, model=primary)
    assert outcome.end == "completed" and len(primary_script.requests) == 1
    assert breaker.asked == [] and breaker.successes == ["openai"]


async def test_process_local_models_have_no_shared_circuit(tmp_path: Path) -> None:
    """Each executor runs its own llama.cpp server: one executor's failures say nothing of
    another's, so the breaker never hears of ``local:`` (nor scripts and replays)."""
    state = new_state("hello")
    sink = MemorySink(state)
    primary, _ = scripted(DOWN, name="local:smollm2")
    fallback, _ = scripted(answer("fine"), name="scripted:b")
    breaker = FakeBreaker("local")
    engine = make_engine(tmp_path, breaker=breaker)
    outcome = await engine.run_turn(state, sink, model=primary, fallback=[fallback])
    assert outcome.end == "completed"
    assert [s.reason for s in sink.of_type(ev.ModelSwitched)] == ["server_error"]
    assert (breaker.asked, breaker.failures, breaker.successes) == ([], [], [])
