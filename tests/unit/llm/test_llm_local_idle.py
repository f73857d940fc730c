"""When a ``local:`` model's server may be stopped: the idle clock runs from the end of the
last request, never while one is in flight."""

from __future__ import annotations

from longhaul.llm.local import IdleClock


def test_the_idle_clock_starts_when_the_last_request_ends() -> None:
    clock = IdleClock(last_finished=0.0)
    clock.begin()
    # a request running far longer than idle_s is never a reason to stop the server
    assert not clock.expired(now=100.0, idle_s=2.0)
    assert clock.remaining(now=100.0, idle_s=2.0) == 2.0
    clock.end(now=100.0)
    assert not clock.expired(now=101.9, idle_s=2.0)
    assert clock.remaining(now=101.0, idle_s=2.0) == 1.0
    assert clock.expired(now=102.0, idle_s=2.0)


def test_overlapping_requests_keep_the_server_until_the_last_one_ends() -> None:
    clock = IdleClock()
    clock.begin()
    clock.begin()
    clock.end(now=10.0)
    assert not clock.expired(now=50.0, idle_s=2.0)  # one still in flight
    clock.end(now=50.0)
    assert not clock.expired(now=51.0, idle_s=2.0)
    assert clock.expired(now=52.0, idle_s=2.0)


def test_idle_s_zero_never_stops_a_server() -> None:
    clock = IdleClock(last_finished=0.0)
    assert not clock.expired(now=1e9, idle_s=0.0)
