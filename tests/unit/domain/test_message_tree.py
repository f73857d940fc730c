"""The message tree (``longhaul.domain.state.messages``): the head's path kept as messages
arrive, rewinds, cuts that keep a call with its results, and the order rule."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev
from longhaul.domain.messages import ToolCall
from longhaul.domain.state.errors import InvalidTransition
from longhaul.domain.state.messages import Message, MessageTree


def msg(seq: int, parent: int | None, role: str = "user", **more: object) -> Message:
    return ev.MessageAppended(sequence=seq, parent_sequence=parent, role=role, **more)  # type: ignore[arg-type]


def grown(*messages: Message) -> MessageTree:
    tree = MessageTree()
    for message in messages:
        tree.check_follows(message.sequence, message.parent_sequence)
        tree.insert(message)
    return tree


def calls(*ids: str) -> list[ToolCall]:
    return [ToolCall.of(id=i, name="t", arguments="{}") for i in ids]


def test_the_path_follows_the_head_and_an_aside_stays_off_it() -> None:
    tree = grown(msg(1, None), msg(2, 1, "assistant"), msg(3, 2, "assistant", side_branch=True))
    assert (tree.head_sequence, tree.last_sequence, tree.path) == (2, 3, [1, 2])
    tree.insert(msg(4, 1, "assistant"))  # a branch from 1 becomes the head
    assert tree.path == [1, 4] and [m.sequence for m in tree.main_path()] == [1, 4]
    assert [m.sequence for m in tree.all_messages()] == [1, 2, 3, 4]


def test_messages_follow_in_order_under_a_known_parent() -> None:
    tree = grown(msg(1, None))
    with pytest.raises(InvalidTransition) as gap:
        tree.check_follows(3, 1)
    assert gap.value.code == "sequence_gap"
    with pytest.raises(InvalidTransition) as unknown:
        tree.check_follows(2, 7)
    assert unknown.value.code == "unknown_sequence"


def test_unanswered_calls_and_a_cut_that_keeps_their_results() -> None:
    tree = grown(
        msg(1, None),
        msg(2, 1, "assistant", tool_calls=calls("a", "b")),
        msg(3, 2, "tool", tool_call_id="a"),
    )
    assert [c.id for c in tree.unanswered_tool_calls()] == ["b"]
    assert [c.id for c in tree.unanswered_tool_calls(upto=2)] == ["a", "b"]
    tree.insert(msg(4, 3, "tool", tool_call_id="b"))
    assert tree.unanswered_tool_calls() == []
    assert tree.safe_cut("t_1", 2) == 4  # a cut at the calls moves past both results
    with pytest.raises(InvalidTransition, match="trace t_1 has no message 9"):
        tree.safe_cut("t_1", 9)


def test_a_rewind_moves_the_head_back_and_inputs_follow_it() -> None:
    tree = grown(msg(1, None), msg(2, 1, "assistant"), msg(3, 2))
    assert tree.rewind_to(2) == {1, 2}
    tree.append_inputs([ev.InputMessage(role="user", content="again")], 5.0, "g_1")
    added = tree.messages[4]
    assert (added.parent_sequence, added.goal_id, added.ts) == (2, "g_1", 5.0)
    assert tree.path == [1, 2, 4]


def test_images_are_counted_as_they_arrive() -> None:
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]
    tree = grown(msg(1, None, content="text"), msg(2, 1, "assistant"), msg(3, 2, content=image))
    assert tree.image_messages == 1
