"""A trace setting is declared once, in ``TraceConfig``: the API accepts every one a client may
set and carries it onto the log, and the Python client sends what the API takes. Adding a
setting to one of them and not the others fails here."""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import msgspec
from longhaul.client import _calls
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.gateway.schemas.traces import CreateTraceRequest

from tests.integration.gateway.harness import user_message

SUB_TRACE_ONLY = {"working_dir", "read_only"}
"""Set by ``agent(…)`` for a sub-trace, never by a client."""

EVERY_SETTING: dict[str, Any] = {
    "model": "scripted:auto",
    "model_fallback": ["scripted:demo"],
    "preset": "browser",
    "tools": ["read"],
    "skills": ["a-skill"],
    "max_iterations": 7,
    "max_tokens": 1000,
    "max_cost": 0.5,
    "on_limit": "ask",
    "temperature": 0.3,
    "system_prompt": "be brief",
    "model_params": {"top_p": 0.5},
    "auto_execute_tools": False,
    "approval": {"tools": ["bash"]},
    "verification": {"json_schema": {"type": "object"}},
    "messaging": True,
    "experiences": False,
}


def settings() -> set[str]:
    return {field.name for field in msgspec.structs.fields(ev.TraceConfig)}


def test_the_api_accepts_every_setting_a_client_may_set() -> None:
    accepted = set(CreateTraceRequest.model_fields)
    assert settings() - SUB_TRACE_ONLY <= accepted, settings() - SUB_TRACE_ONLY - accepted
    assert set(EVERY_SETTING) == settings() - SUB_TRACE_ONLY  # this test names them all


def test_the_client_sends_what_the_api_takes() -> None:
    """Named parameters of ``create_trace`` are API fields; the rest pass as ``options``."""
    parameters = inspect.signature(_calls.create_trace).parameters
    named = {name for name in parameters if name not in {"messages", "idempotency_key", "options"}}
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
