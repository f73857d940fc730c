"""Where a replay first did something else than its record (``longhaul.domain.replay``)."""

from __future__ import annotations

from longhaul.domain.messages import ToolCall
from longhaul.domain.replay import divergence, replayed_trace
from longhaul.domain.state import Message


def _said(*turns: tuple[str, str]) -> list[Message]:
    """A main path: the task, then per turn a call of ``write`` and its tool result."""
    messages = [Message(sequence=0, parent_sequence=None, role="user", content="task")]
    for number, (call_id, result) in enumerate(turns, start=1):
        messages.append(
            Message(
                sequence=2 * number - 1,
                parent_sequence=2 * number - 2,
                role="assistant",
                tool_calls=[ToolCall.of(call_id, "write")],
            )
        )
        messages.append(
            Message(
                sequence=2 * number,
                parent_sequence=2 * number - 1,
                role="tool",
                tool_call_id=call_id,
                content=result,
            )
        )
    return messages


def test_the_same_results_in_the_same_number_of_calls_is_no_divergence() -> None:
    record = _said(("c1", "wrote a"), ("c2", "wrote b"))
    assert divergence(record, _said(("c1", "wrote a"), ("c2", "wrote b"))) is None


def test_a_tool_that_answers_otherwise_is_named_with_its_model_call() -> None:
    found = divergence(
        _said(("c1", "wrote a"), ("c2", "wrote b")),
        _said(("c1", "wrote a"), ("c2", "error: unknown tool write")),
    )
    assert found is not None
    assert found.startswith("model call 2: write answered 'error: unknown tool write'")
    assert "recorded 'wrote b'" in found


def test_a_shorter_or_longer_replay_is_a_divergence() -> None:
    record = _said(("c1", "a"), ("c2", "b"))
    assert divergence(record, _said(("c1", "a"))) == (
        "model call 2: the replay ended after 1 model calls"
    )
    longer = divergence(record, _said(("c1", "a"), ("c2", "b"), ("c3", "c")))
    assert longer == "the replay asked for 3 model calls, the record has 2"


def test_only_replay_model_strings_name_a_recorded_trace() -> None:
    assert replayed_trace("replay:t_abc") == "t_abc"
    assert replayed_trace("replay:") is None
    assert replayed_trace("openai:gpt-4o") is None


def test_ids_made_anew_by_the_replay_are_no_divergence() -> None:
    """A replay's sub-agent has a new trace id, and the harness may give a call a new id:
    calls are matched by place and the ids in their results normalised."""
    record = _said(("c1", "sub-agent t_01JZ8Q7X4M2N3P4Q5R6S7T8V9W finished: ok"))
    replay = _said(("c9", "sub-agent t_01JZ8Q7Y0000000000000000AB finished: ok"))
    assert divergence(record, replay) is None
    keyed = _said(("c1", "see /api/traces/t_k2ff7f9af4d28c0d5eed65c57cd40440c/outputs/x"))
    assert divergence(keyed, _said(("c1", f"see /api/traces/t_k{'0' * 32}/outputs/x"))) is None
    other = divergence(record, _said(("c1", "sub-agent t_01JZ8Q7Y0000000000000000AB failed")))
    assert other is not None and other.startswith("model call 1: write answered")
