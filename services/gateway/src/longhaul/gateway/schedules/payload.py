"""``{{payload.field}}`` in a trigger's template: the webhook's JSON, put into the prompt.

Only the prompt is filled in (``messages`` of a trace body, ``goal`` of a task, and ``name``),
never a model, tool or limit, so a sender can say what to work on but not how it runs. A
path that names nothing becomes empty text; a value that is not text is written as JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from longhaul.gateway.schedules.records import Template

PLACEHOLDER = re.compile(r"\{\{\s*payload((?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
PROMPT_FIELDS = ("messages", "goal", "name")


class TooLarge(ValueError):
    """The payload, put in every placeholder, would exceed the limit."""


def render(template: Template, payload: Any, limit: int) -> Template:
    """The template with every placeholder in its prompt fields replaced. What is put in is
    at most ``limit`` characters in all: a template repeating ``{{payload}}`` would otherwise
    multiply one webhook body into a run no request could send (and the gateway's memory)."""
    budget = [limit]

    def text(match: re.Match[str]) -> str:
        filled = _text(_lookup(payload, match.group(1)))
        budget[0] -= len(filled)
        if budget[0] < 0:
            raise TooLarge(f"the template filled with this payload is over {limit} characters")
        return filled

    body = dict(template.body)
    for field in PROMPT_FIELDS:
        if field in body:
            body[field] = _fill(body[field], text)
    return Template(kind=template.kind, body=body)


def _fill(value: Any, text: Callable[[re.Match[str]], str]) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER.sub(text, value)
    if isinstance(value, list):
        return [_fill(item, text) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, text) for key, item in value.items()}
    return value


def _lookup(payload: Any, path: str) -> Any:
    for part in path.split(".")[1:]:
        if isinstance(payload, dict):
            payload = payload.get(part)
        elif isinstance(payload, list) and part.isdigit() and int(part) < len(payload):
            payload = payload[int(part)]
        else:
            return None
    return payload


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
