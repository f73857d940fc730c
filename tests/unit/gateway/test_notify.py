"""The notifier's pure parts: which events make which notices (and which make none), the two
body shapes, the backoff's bounds and jitter, the signature, and the configuration's checks."""

from __future__ import annotations

import json
import logging

import pytest
from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev
from longhaul.domain.messages import ToolCall
from longhaul.domain.names import Names
from longhaul.domain.notify import Notice, WebhookConfig, delivery_id
from longhaul.domain.signature import sign, verify
from longhaul.domain.state import TaskState, TraceState
from longhaul.gateway.notify.bodies import headline, render
from longhaul.gateway.notify.notices import (
    budget_notices,
    schedule_notice,
    subjects,
    task_notice,
    trace_notice,
)
from longhaul.gateway.notify.redact import UrlRedactor
from longhaul.gateway.notify.sender import backoff_s
from pydantic import ValidationError


def trace(**fields: object) -> TraceState:
    return TraceState(trace_id="t_1", status="running", name="nightly", **fields)  # type: ignore[arg-type]


def test_endings_of_top_level_runs_and_waits_for_a_person_make_notices() -> None:
    done = trace_notice(ev.Completed(summary="all good"), trace(), "k_1")
    assert done is not None and (done.kind, done.summary, done.owner) == (
        "run.completed",
        "all good",
        "k_1",
    )
    failed = trace_notice(ev.Failed(error="boom", stop_reason="truncated"), trace(), None)
    assert failed is not None and (failed.kind, failed.error) == ("run.failed", "boom")
    stopped = trace_notice(ev.Stopped(reason="max_cost"), trace(), None)
    assert stopped is not None and stopped.stop_reason == "max_cost"

    call = ToolCall.of(id="c1", name="deploy", arguments="{}")
    asked = trace()
    asked.messages[1] = ev.MessageAppended(
        sequence=1, parent_sequence=None, role="assistant", tool_calls=[call]
    )
    approval = trace_notice(ev.Waiting(reason="approval", pending_calls=["c1"]), asked, None)
    assert approval is not None and approval.wait is not None
    assert (approval.wait.kind, approval.wait.tool_calls) == ("approval", ["deploy"])
    # a sub-agent's question needs a person too; its ending is its parent's business
    child = trace(parent_trace_id="t_0")
    question = trace_notice(ev.Waiting(reason="human", detail="which?"), child, None)
    assert question is not None and question.wait is not None and question.wait.kind == "question"
    assert trace_notice(ev.Completed(), child, None) is None
    assert trace_notice(ev.Completed(), trace(task_id="k_task"), None) is None
    assert trace_notice(ev.Waiting(reason="verification"), trace(), None) is None


def test_a_run_at_a_spend_limit_tells_what_was_spent_and_how_to_answer() -> None:
    detail = "the key's day limit (UTC) is reached: 300 tokens spent of 250"
    notice = trace_notice(ev.Waiting(reason="budget", detail=detail), trace(), "k_1")
    assert notice is not None and notice.wait is not None
    assert (notice.kind, notice.wait.kind, notice.wait.detail) == ("run.waiting", "budget", detail)
    assert "spend limit" in headline(notice) and detail in headline(notice)


def test_a_budget_notice_comes_once_per_run_and_limit_past_the_ratio() -> None:
    state = trace(config=ev.TraceConfig(max_tokens=1000, max_cost=2.0))
    state.runs = 3
    state.run_usage = ev.RunUsage(tokens=799, cost=1.7)
    event = ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant")
    (cost,) = budget_notices(event, state, None, 0.8)
    assert cost.id == "r3-max_cost" and cost.budget is not None and cost.budget.ratio == 0.85
    state.run_usage = ev.RunUsage(tokens=800, cost=1.7)
    assert {n.id for n in budget_notices(event, state, None, 0.8)} == {
        "r3-max_tokens",
        "r3-max_cost",
    }
    state.status = "completed"  # over: nothing is nearly spent any more
    assert budget_notices(event, state, None, 0.8) == []
    assert budget_notices(event, trace(), None, 0.1) == []  # no limits, no notice


def test_tasks_tell_their_end_and_a_plan_waiting_for_review() -> None:
    task = TaskState(task_id="k_9", goal="compare", owner="k_1")
    review = task_notice(ev.PlanCreated(phases=[], review=True), task)
    assert review is not None and review.wait is not None
    assert (review.kind, review.wait.kind, review.aggregate_id) == (
        "run.waiting",
        "plan_review",
        "k_9",
    )
    assert task_notice(ev.PlanCreated(phases=[]), task) is None
    failed = task_notice(ev.TaskFailed(error="no"), task)
    assert failed is not None and failed.kind == "run.failed"


def test_a_failed_tick_tells_its_schedule_and_a_scheduled_run_names_it() -> None:
    event = ev.ScheduleFailed(
        aggregate_id="sched_1",
        owner="k_1",
        name="nightly",
        tick_ms=1_700_000_000_000,
        run_id="t_s1",
        code="too_many_active_traces",
        error="limit 1",
    )
    notice = schedule_notice(event)
    assert (notice.kind, notice.aggregate_id, notice.owner, notice.tick) == (
        "schedule.failed",
        "sched_1",
        "k_1",
        "2023-11-14T22:13:20.000Z",
    )
    assert delivery_id(notice, "ops") == f"sched_1.{event.id}.ops"
    assert headline(notice) == (
        "schedule sched_1 (nightly) started nothing at 2023-11-14T22:13:20.000Z\n"
        "too_many_active_traces: limit 1"
    )
    failed = trace_notice(ev.Failed(error="boom"), trace(schedule_id="sched_1"), "k_1")
    assert failed is not None and failed.schedule_id == "sched_1"
    task = TaskState(task_id="task_1", goal="g", owner="k_1", schedule_id="sched_1")
    ended = task_notice(ev.TaskFailed(error="no"), task)
    assert ended is not None and ended.schedule_id == "sched_1"


def test_the_consumer_reads_only_the_events_its_webhooks_want() -> None:
    names = Names("ns_")
    assert subjects(names, ["run.stopped"]) == ["ns_lh.ev.trace.*.stopped"]
    assert len(subjects(names, ["run.completed", "run.failed"])) == 4
    assert subjects(names, ["schedule.failed"]) == ["ns_lh.ev.schedule.*.schedule_failed"]


def test_both_body_shapes_name_the_delivery() -> None:
    notice = Notice(
        id="e1", kind="run.failed", at=1.0, aggregate="trace", trace_id="t_1", error="<b>&"
    )
    ident = delivery_id(notice, "ops")
    assert ident == "t_1.e1.ops"
    own = json.loads(render(notice, "longhaul", ident))
    assert own == {
        "delivery_id": ident,
        "id": "e1",
        "kind": "run.failed",
        "at": 1.0,
        "aggregate": "trace",
        "trace_id": "t_1",
        "error": "<b>&",
    }
    slack = json.loads(render(notice, "slack", ident))
    assert slack["text"] == "run t_1 failed\n&lt;b&gt;&amp;"
    assert slack["blocks"][0]["text"] == {"type": "mrkdwn", "text": slack["text"]}
    assert ident in slack["blocks"][1]["elements"][0]["text"]


def test_backoff_doubles_with_jitter_is_capped_and_honours_retry_after() -> None:
    hook = WebhookConfig(name="h", url="https://example.com/x", retry_base_s=1, retry_max_s=10)  # type: ignore[arg-type]
    assert [backoff_s(hook, n, rand=lambda: 0.0) for n in (1, 2, 3, 4, 5, 9)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        5.0,
        5.0,
    ]
    assert backoff_s(hook, 3, rand=lambda: 0.999) == pytest.approx(4.0, rel=1e-3)
    assert backoff_s(hook, 1, retry_after_s=7, rand=lambda: 0.0) == 7
    assert backoff_s(hook, 1, retry_after_s=3600, rand=lambda: 0.0) == 10


def test_the_signature_covers_the_timestamp_and_the_body() -> None:
    signed = sign("s", "1700000000", b'{"a":1}')
    assert signed.startswith("sha256=") and len(signed) == 7 + 64
    assert verify("s", "1700000000", b'{"a":1}', signed)
    assert not verify("s", "1700000001", b'{"a":1}', signed)
    assert not verify("s", "1700000000", b'{"a":2}', signed)
    assert not verify("t", "1700000000", b'{"a":1}', signed)


def test_the_configuration_refuses_what_could_not_work() -> None:
    url = "https://hooks.example.com/x"
    with pytest.raises(ValidationError, match="unique"):
        LonghaulConfig(notify=[{"name": "a", "url": url}, {"name": "a", "url": url}])  # type: ignore[list-item]
    for bad in (
        {"name": "a b", "url": url},
        {"name": "a", "url": "ftp://x"},
        {"name": "a", "url": url, "events": ["run.exploded"]},
        {"name": "a", "url": url, "keys": ["not-a-key-id"]},
        {"name": "a", "url": url, "budget_ratio": 1.5},
        {"name": "a", "url": url, "format": "teams"},
    ):
        with pytest.raises(ValidationError):
            LonghaulConfig(notify=[bad])  # type: ignore[list-item]


def test_webhook_urls_are_named_never_shown_in_errors_and_log_lines() -> None:
    secret_url = "https://hooks.slack.com/services/T000/B000/XXXX"
    hook = WebhookConfig.model_validate({"name": "chat", "url": secret_url})
    redactor = UrlRedactor([hook])
    assert redactor.scrub(f"ConnectError: {secret_url} refused") == (
        "ConnectError: [webhook chat] refused"
    )
    record = logging.LogRecord(
        "httpx", logging.INFO, "", 0, "HTTP Request: %s %s", ("POST", secret_url), None
    )
    assert redactor.filter(record) and record.getMessage() == "HTTP Request: POST [webhook chat]"
