"""Experience records (``longhaul.domain.experiences``): ranking as the design specifies,
citations, and the markdown file's exact round trip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from longhaul.domain import experiences as exp

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def item(
    id: str, intent: list[str], state: list[str], helpful: int = 0, harmful: int = 0, age: int = 0
) -> exp.Experience:
    return exp.make(
        id=id,
        category="tool_usage",
        content=f"rule {id}",
        intent=intent,
        state=state,
        helpful=helpful,
        harmful=harmful,
        created_at=T0 - timedelta(days=age),
    )


def test_rank_weighs_intent_over_state_then_net_score() -> None:
    pool = [
        item("ex_state2", ["other"], ["repo", "python"]),
        item("ex_intent", ["search"], []),
        item("ex_both", ["search"], ["repo"]),
        item("ex_bothbad", ["search"], ["repo"], helpful=1, harmful=3),
        item("ex_none", ["cook"], ["kitchen"]),
        item("ex_state1", [], ["python"], helpful=9),
    ]
    ranked = exp.rank(pool, intent=["Search"], state=["repo", "Python"], limit=10)
    assert [e.id for e in ranked] == [
        "ex_both",
        "ex_bothbad",
        "ex_intent",
        "ex_state2",
        "ex_state1",
    ]
    top = exp.rank(pool, intent=["search"], limit=2)
    assert {e.id for e in top} == {"ex_both", "ex_intent"}  # net 0 beats net -2


def test_rank_prefers_newer_on_a_tie() -> None:
    pool = [item("ex_old", ["a"], [], age=3), item("ex_new", ["a"], [], age=1)]
    assert [e.id for e in exp.rank(pool, intent=["a"])] == ["ex_new", "ex_old"]


def test_cited_ids_and_reference_block() -> None:
    assert exp.cited_ids("per ex_01ABC and (ex_9), not xex_2 or ex_") == {"ex_01ABC", "ex_9"}
    block = exp.reference_block([item("ex_1", ["a"], [])])
    assert block.startswith("## Reference experiences") and "[ex_1] (tool_usage) rule ex_1" in block


def test_markdown_round_trip_is_exact_and_hand_written_blocks_get_defaults() -> None:
    tricky = exp.make(
        id="ex_2",
        category="logic_flow",
        content="first\n---\n\\---\n\\\\---\n\n--- not alone\nlast",
        intent=["x"],
        trace_id="t_1",
        helpful=2,
        harmful=1,
        created_at=datetime(2026, 2, 3, 4, 5, 6, 789012, tzinfo=UTC),
    )
    items = [item("ex_1", ["a b"], ["c"]), tricky]
    text = exp.to_markdown(items)
    assert exp.from_markdown(text) == items
    assert exp.to_markdown(exp.from_markdown(text)) == text

    hand = exp.from_markdown("---\ncategory: environment\n---\nNo network in CI.\n")
    assert hand[0].content == "No network in CI." and hand[0].id.startswith("ex_")
    assert hand[0].metrics == exp.Metrics()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("hello\n---\ncategory: environment\n---\nx\n", "must start"),
        ("---\ncategory: environment\nx\n", "unbalanced"),
        ("---\ncategory: gossip\n---\nx\n", "unknown category"),
        ("---\ncategory: environment\n---\n\n", "content"),
        ("---\n[1, 2]\n---\nx\n", "mapping"),
        ("---\nid: ex_1\ncategory: environment\nsecret: 1\n---\nx\n", "block 1"),
        ("---\nid: ../x\ncategory: environment\n---\nx\n", "invalid experience id"),
        (
            "---\nid: ex_1\ncategory: environment\n---\nx\n"
            "---\nid: ex_1\ncategory: environment\n---\ny\n",
            "twice",
        ),
    ],
)
def test_bad_files_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(exp.ExperienceError, match=reason):
        exp.from_markdown(text)
