"""A remote agent's answer kept on the parent is cut at ``SUMMARY_LIMIT`` characters, and says
it was cut (an A2A task's artifacts can be far longer)."""

from __future__ import annotations

from longhaul.executor.remote_status import SUMMARY_LIMIT, clip


def test_a_long_answer_is_cut_with_a_marker_a_short_one_is_kept() -> None:
    assert clip("short") == "short"
    assert clip("x" * SUMMARY_LIMIT) == "x" * SUMMARY_LIMIT
    cut = clip("y" * 50_000)
    assert len(cut) == SUMMARY_LIMIT and cut.startswith("y" * 1000)
    assert cut.endswith("[cut: the answer has 50000 characters; the first ones are shown]")
