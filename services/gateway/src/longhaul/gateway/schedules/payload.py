"""``{{payload.field}}`` in a trigger's template: the webhook's JSON, put into the prompt.

Only the prompt is filled in (``messages`` of a trace body, ``goal`` of a task, and ``name``),
never a model, tool or limit, so a sender can say what to work on but not how it runs. A
path that names nothing becomes empty text; a value that is not text is written as JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from longhaul.gateway.schedules.records import Template

PLACEHOLDER = re.compile(r"\{\{\s*payload((?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
PROMPT_FIELDS = ("messages", "goal", "name")


def render(template: Template, payload: Any) -> Template:
    """The template with every placeholder in its prompt fields replaced."""
    body = dict(template.body)
    for field in PROMPT_FIELDS:
        if field in body:
            body[field] = _fill(body[field], payload)
    return Template(kind=template.kind, body=body)


def _fill(value: Any, payload: Any) -> Any:
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda match: _text(_lookup(payload, match.group(1))), value)
    if isinstance(value, list):
        return [_fill(item, payload) for item in value]
    if isinstance(value, dict):
        return {key: _fill(item, payload) for key, item in value.items()}
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
