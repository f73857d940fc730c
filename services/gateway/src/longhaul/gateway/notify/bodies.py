"""A notice as a webhook body: longhaul's own JSON (the :class:`Notice` with its
``delivery_id``) or a Slack incoming-webhook message (``{"text", "blocks"}``, which Slack,
Mattermost and other Slack-compatible receivers accept)."""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.domain.notify import Notice

WAIT_LINES = {
    "question": "asks a question",
    "approval": "waits for approval",
    "plan_review": "waits for its plan's review",
    "budget": "is at a spend limit and asks for a raise or a stop",
}


WHAT = {"trace": "run", "task": "task", "schedule": "schedule"}


def _what(notice: Notice) -> str:
    what = f"{WHAT[notice.aggregate]} {notice.aggregate_id}"
    return what + (f" ({notice.name})" if notice.name else "")


def headline(notice: Notice) -> str:
    """One line saying what happened, then its details (plain text)."""
    what = _what(notice)
    if notice.kind == "run.completed":
        line, more = f"{what} completed", notice.summary
    elif notice.kind == "run.failed":
        line, more = f"{what} failed", notice.error
    elif notice.kind == "run.stopped":
        line, more = f"{what} stopped ({notice.stop_reason or 'asked'})", None
    elif notice.kind == "run.waiting" and notice.wait is not None:
        line = f"{what} {WAIT_LINES[notice.wait.kind]}"
        tools = ", ".join(notice.wait.tool_calls)
        more = f"tools: {tools}" if tools else notice.wait.detail
    elif notice.kind == "schedule.failed":
        line, more = f"{what} started nothing at {notice.tick}", notice.error
    elif notice.budget is not None:
        budget = notice.budget
        line = f"{what} has used {budget.ratio:.0%} of its {budget.limit}"
        more = f"{budget.used:g} of {budget.max:g}"
    else:
        line, more = f"{what}: {notice.kind}", None
    return f"{line}\n{more}" if more else line


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(notice: Notice, delivery_id: str) -> dict[str, Any]:
    text = _slack_escape(headline(notice))
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"`{notice.kind}` · delivery `{delivery_id}`"}
                ],
            },
        ],
    }


def render(notice: Notice, format: str, delivery_id: str) -> bytes:
    """The body's bytes, as signed and sent (the same for every attempt of a delivery)."""
    if format == "slack":
        return msgspec.json.encode(slack_body(notice, delivery_id))
    return msgspec.json.encode({"delivery_id": delivery_id, **msgspec.to_builtins(notice)})
