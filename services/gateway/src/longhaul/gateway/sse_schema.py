"""The documented shape of the ``…/events`` streams (``text/event-stream``).

OpenAPI 3.1 tools (schemathesis among them) read the ``schema`` of an event-stream response as
the schema of *one* event: an object of its fields, ``event``, ``id`` and ``data``, where
``data`` is a string whose JSON content ``contentSchema`` describes. Each stored event type is
one branch (``event`` is its type and ``data`` that event, from the domain's msgspec structs so
the document cannot drift from what is encoded); the stream's own notices are the others:
``live`` (token deltas, tool progress), ``subtree`` (waits below a trace), ``heartbeat`` and
``error``. A generated client can pick the data type by the event name.
"""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.agent.contract import LiveUpdate
from longhaul.domain import events as ev

PREFIX = "event."
"""Component names of the event structs (``event.TraceCreated``): the API's own pydantic
models may share a struct's name (``TraceConfig``, ``Usage``)."""
REF = "#/components/schemas/" + PREFIX + "{name}"
NULLABLE_STRING = {"type": ["string", "null"]}

NOTICES: dict[str, dict[str, Any]] = {
    "heartbeat": {
        "type": "object",
        "required": ["ts"],
        "properties": {"ts": {"type": "number", "description": "server time (Unix seconds)"}},
    },
    "error": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
        "description": "the stream failed; reconnect with Last-Event-ID",
    },
    "subtree": {
        "type": "object",
        "required": ["waiting_below"],
        "properties": {
            "waiting_below": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["trace_id"],
                    "properties": {
                        "trace_id": {"type": "string"},
                        "parent_trace_id": NULLABLE_STRING,
                        "name": NULLABLE_STRING,
                        "reason": NULLABLE_STRING,
                    },
                },
            }
        },
        "description": "the sub-traces below this one waiting on a person or a verifier",
    },
}


def _frame(event: str, data: dict[str, Any], *, stored: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "event": {"const": event},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": data,
        },
    }
    if stored:
        properties["id"] = {"type": "string", "pattern": "^[0-9]+$"}
    return {
        "type": "object",
        "required": ["event", "data", *(["id"] if stored else [])],
        "properties": properties,
    }


def event_stream_schema(aggregate: ev.Aggregate) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema of one SSE event of an ``aggregate``'s stream, and the components its
    ``$ref`` point to (to add to the document's ``components.schemas``)."""
    stored = {tag: cls for tag, cls in ev.EVENT_TYPES.items() if cls.aggregate == aggregate}
    live: list[Any] = [LiveUpdate] if aggregate == "trace" else []
    refs, components = msgspec.json.schema_components([*stored.values(), *live], ref_template=REF)
    branches = [_frame(tag, ref, stored=True) for tag, ref in zip(stored, refs, strict=False)]
    notices = dict(NOTICES)
    if aggregate == "trace":
        notices["live"] = refs[-1]
    else:
        notices.pop("subtree")
    branches += [_frame(name, data, stored=False) for name, data in notices.items()]
    return {"oneOf": branches}, {PREFIX + name: schema for name, schema in components.items()}


LAST_EVENT_ID = {"type": "string", "pattern": "^[0-9]{1,19}$"}


def data_events(description: str) -> dict[str, Any]:
    """The ``text/event-stream`` content of a stream whose events carry only ``data`` (the
    protocol surfaces' streams): one event, as OpenAPI 3.1 tools read an event-stream schema."""
    data = {"type": "string", "description": description}
    schema = {"type": "object", "required": ["data"], "properties": {"data": data}}
    return {"text/event-stream": {"schema": schema}}


"""What ``Last-Event-ID`` may be: an ``id`` the stream sent (FastAPI would document an optional
header as string-or-null, and a header has no null)."""


def document_event_streams(document: dict[str, Any]) -> None:
    """Give every ``…/events`` route of ``document`` its event schema and resume header."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for path, item in document.get("paths", {}).items():
        if not path.endswith("/events") or "get" not in item:
            continue
        aggregate: ev.Aggregate = "trace" if path.startswith("/api/traces/") else "task"
        schema, components = event_stream_schema(aggregate)
        schemas.update(components)
        content = item["get"]["responses"]["200"]["content"]
        content["text/event-stream"] = {"schema": schema}
        for parameter in item["get"].get("parameters", []):
            if parameter["in"] == "header" and parameter["name"] == "last-event-id":
                parameter["schema"] = dict(LAST_EVENT_ID)
