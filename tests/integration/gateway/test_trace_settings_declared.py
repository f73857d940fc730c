"""A trace setting is declared once, in ``TraceSettings``, and recorded in ``TraceConfig``: the
API accepts every one a client may set and carries it onto the log, and the Python client sends
what the API takes. Adding a setting to one of them and not the others fails here."""

from __future__ import annotations

import inspect

import httpx
import msgspec
from longhaul.client import _calls
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.gateway.schemas.traces import CreateTraceRequest

from tests.integration.gateway.harness import user_message
from tests.unit.test_client_models import EVERY_SETTING

SUB_TRACE_ONLY = {"working_dir", "read_only"}
"""Set by ``agent(…)`` for a sub-trace, never by a client."""


def settings() -> set[str]:
    return {field.name for field in msgspec.structs.fields(ev.TraceConfig)}


def test_the_api_accepts_every_setting_a_client_may_set() -> None:
    accepted = set(CreateTraceRequest.model_fields)
    assert settings() - SUB_TRACE_ONLY <= accepted, settings() - SUB_TRACE_ONLY - accepted
    assert set(EVERY_SETTING) == settings() - SUB_TRACE_ONLY  # this test names them all


def test_the_client_sends_what_the_api_takes() -> None:
    """Named parameters of ``create_trace`` are API fields; the rest pass as ``options``."""
    parameters = inspect.signature(_calls.create_trace).parameters
    named = set(parameters) - {"messages", "idempotency_key", "settings", "options"}
    assert named <= set(CreateTraceRequest.model_fields)
    assert inspect.Parameter.VAR_KEYWORD in {p.kind for p in parameters.values()}


async def test_every_setting_reaches_the_log(client: httpx.AsyncClient, store: EventStore) -> None:
    response = await client.post(
        "/api/traces", json={"messages": [user_message("hi")], **EVERY_SETTING}
    )
    assert response.status_code == 202, response.text
    trace_id = response.json()["trace_id"]
    [created] = [r.event async for r in store.replay("trace", trace_id)]
    assert isinstance(created, ev.TraceCreated)
    default = ev.TraceConfig()
    unset = [
        name
        for name in settings() - SUB_TRACE_ONLY
        if getattr(created.config, name) == getattr(default, name)
    ]
    assert unset == [], f"sent but not recorded: {unset}"
