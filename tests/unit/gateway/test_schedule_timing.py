"""When ticks fall (cron in a time zone, intervals, one-offs) and what a schedule does with
the ticks that are due (overlap and catch-up), as pure functions; the webhook's signature
and payload filling."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from longhaul.gateway.errors import ApiError
from longhaul.gateway.schedules import payload, policy, signing
from longhaul.gateway.schedules.records import Template
from longhaul.gateway.schedules.timing import Timing, parse_rfc3339, rfc3339


def ms(text: str) -> int:
    return parse_rfc3339(text)


def test_cron_ticks_fall_in_the_schedule_s_time_zone_across_a_dst_change() -> None:
    paris = Timing(cron="0 9 * * *", timezone="Europe/Paris")
    # 09:00 in Paris is 08:00 UTC in winter and 07:00 UTC in summer (DST began 2026-03-29)
    assert rfc3339(paris.first_after(ms("2026-03-27T12:00:00Z")) or 0) == "2026-03-28T08:00:00.000Z"
    assert rfc3339(paris.first_after(ms("2026-03-28T12:00:00Z")) or 0) == "2026-03-29T07:00:00.000Z"
    due = paris.due(ms("2026-03-27T00:00:00Z"), ms("2026-03-30T12:00:00Z"), limit=10)
    assert [rfc3339(t) for t in due] == [
        "2026-03-27T08:00:00.000Z",
        "2026-03-28T08:00:00.000Z",
        "2026-03-29T07:00:00.000Z",
        "2026-03-30T07:00:00.000Z",
    ]
    assert len(paris.due(0, ms("2026-03-30T12:00:00Z"), limit=3)) == 3  # the latest 3 only


def test_intervals_count_from_their_anchor_and_a_one_off_ticks_once() -> None:
    every = Timing(every_s=2, anchor_ms=1_000)
    assert every.first_after(1_000) == 3_000 and every.first_after(2_999) == 3_000
    assert every.due(3_000, 9_500, limit=10) == [3_000, 5_000, 7_000, 9_000]
    assert every.due(3_000, 9_500, limit=2) == [7_000, 9_000]
    once = Timing(at="2030-01-01T10:00:00+01:00")
    assert once.first_after(0) == ms("2030-01-01T09:00:00Z")
    assert once.first_after(ms("2030-01-01T09:00:00Z")) is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({}, "exactly one"),
        ({"cron": "* * * * *", "every_s": 5.0}, "exactly one"),
        ({"cron": "* * * *"}, "5 fields"),
        ({"cron": "0 0 * * * *"}, "5 fields"),
        ({"cron": "61 * * * *"}, "invalid cron"),
        ({"cron": "* * * * *", "timezone": "Nowhere/Land"}, "unknown timezone"),
        ({"every_s": 0.5}, "at least"),
        ({"at": "2030-01-01T10:00:00"}, "offset"),
    ],
)
def test_a_timing_that_cannot_tick_is_refused(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Timing(**fields)  # type: ignore[arg-type]


def next_of(tick: int) -> int:
    return tick + 1_000


@pytest.mark.parametrize(
    ("catch_up", "overlap", "busy", "late_ms", "expected"),
    [
        ("none", "skip", False, 0, policy.Step(3_000, 4_000, skipped=2)),
        ("none", "skip", False, policy.GRACE_MS + 1, policy.Step(None, 4_000, skipped=3)),
        ("latest", "skip", False, policy.GRACE_MS + 1, policy.Step(3_000, 4_000, skipped=2)),
        ("all", "skip", False, 0, policy.Step(1_000, 2_000)),
        ("all", "skip", True, 0, policy.Step(None, 4_000, skipped=3)),
        ("all", "queue", True, 0, policy.Step(None, None, wait=True)),
        ("none", "queue", False, policy.GRACE_MS + 1, policy.Step(3_000, 4_000, skipped=2)),
        ("all", "allow", True, 0, policy.Step(1_000, 2_000)),
    ],
)
def test_overlap_and_catch_up_decide_which_due_tick_starts(
    catch_up: policy.CatchUp,
    overlap: policy.Overlap,
    busy: bool,
    late_ms: int,
    expected: policy.Step,
) -> None:
    due = [1_000, 2_000, 3_000]
    step = policy.step(
        due,
        catch_up=catch_up,
        overlap=overlap,
        busy=busy and overlap != "allow",
        now=3_000 + late_ms,
        after=next_of,
    )
    assert step == expected


def test_a_signature_is_checked_against_the_exact_bytes_and_a_fresh_timestamp() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    stamp = str(int(now))
    body = b'{"a": 1}'
    good = signing.signature("s3cret", stamp, body)
    assert signing.verify("s3cret", stamp, good, body, now + 299) is False
    # an unsigned Idempotency-Key passes (the spec's form); a signed one is said to be
    assert signing.verify("s3cret", stamp, good, body, now, "k-1") is False
    keyed = signing.signature("s3cret", stamp, body, "k-1")
    assert signing.verify("s3cret", stamp, keyed, body, now, "k-1") is True
    for sent, key in ((keyed, "k-2"), (keyed, None)):
        with pytest.raises(ApiError):
            signing.verify("s3cret", stamp, sent, body, now, key)
    for secret, sent_stamp, sent, sent_body, at, code in [
        ("s3cret", stamp, good, b'{"a": 2}', now, "invalid_signature"),
        ("other", stamp, good, body, now, "invalid_signature"),
        ("s3cret", stamp, good, body, now + 301, "stale_timestamp"),
        ("s3cret", "12.5", good, body, now, "stale_timestamp"),
        ("s3cret", None, good, body, now, "invalid_signature"),
    ]:
        with pytest.raises(ApiError) as refused:
            signing.verify(secret, sent_stamp, sent, sent_body, at)
        assert refused.value.status == 401 and refused.value.code == code


def test_payload_fills_only_the_prompt() -> None:
    template = Template(
        kind="trace",
        body={
            "messages": [
                {
                    "role": "user",
                    "content": "fix {{ payload.issue.title }} ({{payload.labels}})"
                    " {{payload.nope}}",
                }
            ],
            "model": "{{payload.model}}",
        },
    )
    data = {"issue": {"title": "crash"}, "labels": ["bug"], "model": "openai:gpt-4o"}
    filled = payload.render(template, data, 1000)
    assert filled.body["messages"][0]["content"] == 'fix crash (["bug"]) '
    assert filled.body["model"] == "{{payload.model}}"  # never how it runs
    # a payload that spells a placeholder is text, never filled again
    again = payload.render(template, {"issue": {"title": "{{payload.model}}"}}, 1000)
    assert again.body["messages"][0]["content"].startswith("fix {{payload.model}} (")
    # what is put in is bounded, however often the template repeats it
    repeated = Template(kind="trace", body={"name": "{{payload}}" * 100})
    assert len(payload.render(repeated, "x" * 10, 1000).body["name"]) == 1000
    with pytest.raises(payload.TooLarge):
        payload.render(repeated, "x" * 11, 1000)
