"""Names: the stream and subjects follow the namespace, cached per ``Names`` value."""

from __future__ import annotations

from dataclasses import replace

from longhaul.domain.names import Names


def test_cached_names_follow_their_own_namespace() -> None:
    first = Names("one_")
    assert (first.stream, first.subject("trace", "t_1", "x")) == (
        "ONE_LH_EVENTS",
        "one_lh.ev.trace.t_1.x",
    )
    other = replace(first, namespace="two_")  # a new value: nothing cached from the first
    assert (other.stream, other.aggregate_filter("trace", "t_1")) == (
        "TWO_LH_EVENTS",
        "two_lh.ev.trace.t_1.>",
    )
    assert first.stream == "ONE_LH_EVENTS" and first == Names("one_")
    assert hash(first) == hash(Names("one_"))
