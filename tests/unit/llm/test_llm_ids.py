"""Cross-provider tool-call ids and provider_fields filtering."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from longhaul.llm.ids import ID_FORMATS, prepare_history, rewrite_tool_call_ids

ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def call(call_id: str, name: str = "f") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def turn(*ids: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [call(i) for i in ids]},
        *({"role": "tool", "tool_call_id": i, "content": "r"} for i in ids),
    ]


def pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(call id, result id) for every result, by position within its turn."""
    found, calls = [], []
    for message in messages:
        if message["role"] == "assistant":
            calls = [c["id"] for c in message.get("tool_calls", [])]
        elif message["role"] == "tool":
            found.append((calls.pop(0), message["tool_call_id"]))
    return found


def test_openai_ids_become_anthropic_ids_consistently() -> None:
    history = [{"role": "user", "content": "x"}, *turn("call_abc123", "call.with.dots")]
    rewritten = rewrite_tool_call_ids(history, "anthropic")
    ids = [c["id"] for c in rewritten[1]["tool_calls"]]
    assert all(i.startswith("toolu_") and ANTHROPIC_ID.match(i) for i in ids)
    assert pairs(rewritten) == [(ids[0], ids[0]), (ids[1], ids[1])]
    assert rewrite_tool_call_ids(history, "anthropic") == rewritten
    assert history[1]["tool_calls"][0]["id"] == "call_abc123"


def test_ids_already_in_the_target_format_are_untouched() -> None:
    history = turn("toolu_01XYZ", "toolu_02abc")
    assert rewrite_tool_call_ids(history, "anthropic") == history
    assert rewrite_tool_call_ids(turn("call_1"), "openai") == turn("call_1")


def test_overlong_openai_compatible_ids_are_shortened() -> None:
    vllm_id = "chatcmpl-tool-" + "f" * 32
    rewritten = rewrite_tool_call_ids(turn(vllm_id), "openai")
    new_id = rewritten[0]["tool_calls"][0]["id"]
    assert new_id.startswith("call_") and len(new_id) <= 40
    assert rewritten[1]["tool_call_id"] == new_id


def test_reused_ids_across_turns_become_unique_and_results_follow_their_turn() -> None:
    history = turn("call_0") + turn("call_0")
    rewritten = rewrite_tool_call_ids(history, "anthropic")
    first, second = rewritten[0]["tool_calls"][0]["id"], rewritten[2]["tool_calls"][0]["id"]
    assert first != second
    assert rewritten[1]["tool_call_id"] == first and rewritten[3]["tool_call_id"] == second


def test_gemini_ids_are_left_alone() -> None:
    history = turn("anything goes")
    assert rewrite_tool_call_ids(history, "gemini") == history


def test_provider_fields_reach_only_their_provider() -> None:
    fields = {"anthropic": {"thinking": [1]}, "gemini": {"signatures": {"call_1": "s"}}}
    history = [{"role": "assistant", "content": "hi", "provider_fields": fields}]
    assert prepare_history(history, "anthropic")[0]["provider_fields"] == {
        "anthropic": {"thinking": [1]}
    }
    assert prepare_history(history, "gemini")[0]["provider_fields"] == {
        "gemini": {"signatures": {"call_1": "s"}}
    }
    assert "provider_fields" not in prepare_history(history, "openai")[0]


ids = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=80
)


@given(
    st.lists(st.lists(ids, min_size=1, max_size=3, unique=True), min_size=1, max_size=4),
    st.sampled_from(["openai", "anthropic"]),
)
def test_rewriting_is_valid_unique_paired_deterministic_and_idempotent(
    turns: list[list[str]], target: str
) -> None:
    """Ids are unique within a turn (as every provider makes them) but may repeat across."""
    history = [message for turn_ids in turns for message in turn(*turn_ids)]
    rewritten = rewrite_tool_call_ids(history, target)
    call_ids = [c["id"] for m in rewritten if m["role"] == "assistant" for c in m["tool_calls"]]
    assert all(ID_FORMATS[target].accepts(i) for i in call_ids)
    assert len(set(call_ids)) == len(call_ids)
    assert all(a == b for a, b in pairs(rewritten))
    assert rewrite_tool_call_ids(history, target) == rewritten
    assert rewrite_tool_call_ids(rewritten, target) == rewritten
