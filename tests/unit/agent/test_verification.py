"""Final answers with verification on: request → verdict → complete, reinject, or fail."""

from __future__ import annotations

from pathlib import Path

from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig, VerificationConfig
from longhaul.domain.state import TraceState

from tests.unit.agent.support import MemorySink, answer, make_engine, new_state, scripted

METHOD = {"check": "pytest"}


def verified_state() -> TraceState:
    return new_state("solve it", config=ev.TraceConfig(verification=METHOD))


async def verdict(sink: MemorySink, passed: bool, attempt: int, log: str = "") -> None:
    if passed:
        await sink.emit([ev.VerificationPassed(attempt=attempt, log=log)])
    else:
        await sink.emit([ev.VerificationFailed(attempt=attempt, errors=["2 tests fail"], log=log)])


async def test_fail_reinject_pass(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    state = verified_state()
    sink = MemorySink(state)
    model, _ = scripted(answer("v1"))
    outcome = await engine.run_turn(state, sink, model=model)
    [requested] = sink.of_type(ev.VerificationRequested)
    assert outcome.end == "waiting" and state.wait_reason == "verification"
    assert (requested.attempt, requested.answer, requested.method) == (1, "v1", METHOD)
    assert requested.answer_sequence == state.head_sequence

    await verdict(sink, passed=False, attempt=1, log="FAILED test_a\nFAILED test_b")
    model2, script2 = scripted(answer("v2"))
    outcome = await engine.run_turn(state, sink, model=model2)
    feedback = script2.requests[0].messages[-1]
    assert feedback["role"] == "user"
    assert "- 2 tests fail" in feedback["content"] and "FAILED test_b" in feedback["content"]
    assert outcome.end == "waiting"
    assert sink.of_type(ev.VerificationRequested)[-1].attempt == 2

    await verdict(sink, passed=True, attempt=2)
    done, script3 = scripted()
    outcome = await engine.run_turn(state, sink, model=done)
    assert outcome.end == "completed" and state.summary == "v2"
    assert script3.requests == []


async def test_fail_twice_fails_with_the_log(tmp_path: Path) -> None:
    engine = make_engine(tmp_path)
    state = verified_state()
    sink = MemorySink(state)
    await engine.run_turn(state, sink, model=scripted(answer("v1"))[0])
    await verdict(sink, passed=False, attempt=1, log="first log")
    await engine.run_turn(state, sink, model=scripted(answer("v2"))[0])
    await verdict(sink, passed=False, attempt=2, log="second log")
    idle, script = scripted()
    outcome = await engine.run_turn(state, sink, model=idle)
    [failed] = sink.of_type(ev.Failed)
    assert outcome.end == "failed" and outcome.stop_reason == "verification_failed"
    assert failed.log == "second log" and "2 attempt(s)" in failed.error
    assert state.status == "failed" and script.requests == []


async def test_no_reinjection_when_max_is_zero(tmp_path: Path) -> None:
    config = PipelineConfig(verification=VerificationConfig(max_reinjections=0))
    engine = make_engine(tmp_path, config=config)
    state = verified_state()
    sink = MemorySink(state)
    await engine.run_turn(state, sink, model=scripted(answer("v1"))[0])
    await verdict(sink, passed=False, attempt=1, log="the log")
    idle, script = scripted()
    outcome = await engine.run_turn(state, sink, model=idle)
    assert outcome.end == "failed" and sink.of_type(ev.Failed)[0].log == "the log"
    assert script.requests == []
    assert not [m for m in sink.of_type(ev.MessageAppended) if m.role == "user"]


async def test_without_verification_the_answer_completes(tmp_path: Path) -> None:
    state = new_state()
    sink = MemorySink(state)
    await make_engine(tmp_path).run_turn(state, sink, model=scripted(answer("42"))[0])
    [completed] = sink.of_type(ev.Completed)
    assert completed.summary == "42" and not sink.of_type(ev.VerificationRequested)
