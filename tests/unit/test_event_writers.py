"""The NATS publish permissions (``longhaul.domain.permissions.WRITES``) match the code: every
event class a service's source constructs is in its list, and nothing more is. A service that
starts writing a new event fails here, not with a permissions violation under ``longhaul up``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from longhaul.domain import events as ev
from longhaul.domain.names import Names
from longhaul.domain.permissions import WRITES, publish_allow

ROOT = Path(__file__).resolve().parents[2]

# The source each service runs: the executor runs the agent loop of libs/agent.
SOURCES = {
    "gateway": ["services/gateway/src"],
    "planner": ["services/planner/src"],
    "verifier": ["services/verifier/src"],
    "executor": ["services/executor/src", "libs/agent/src"],
}

EVENT_CLASSES = {
    cls.__name__
    for cls in vars(ev).values()
    if isinstance(cls, type)
    and issubclass(cls, (ev.TraceEvent, ev.TaskEvent, ev.ScheduleEvent))
    and cls not in (ev.TraceEvent, ev.TaskEvent, ev.ScheduleEvent)
}


def constructed_events(directories: list[str]) -> set[str]:
    found: set[str] = set()
    for directory in directories:
        for path in (ROOT / directory).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if name in EVENT_CLASSES:
                    found.add(name)
    return found


@pytest.mark.parametrize("service", sorted(SOURCES))
def test_a_service_may_publish_exactly_the_events_it_writes(service: str) -> None:
    allowed = {cls.__name__ for cls in WRITES[service]}  # type: ignore[index]
    written = constructed_events(SOURCES[service])
    assert written == allowed, (
        f"{service} writes {sorted(written - allowed)} without permission"
        f" and is allowed {sorted(allowed - written)} it never writes:"
        " update longhaul.domain.permissions.WRITES"
    )


def test_only_the_import_writer_may_publish_every_trace_event() -> None:
    """An imported log holds every kind of trace event: the import writer's user may write
    them all; a service's user, the executor's included (it runs the agents), only what its
    code writes."""
    names = Names()
    trace_events = {
        c for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ev.TraceEvent)
    }
    trace_events.discard(ev.TraceEvent)
    assert set(WRITES["importer"]) == trace_events
    every = {names.type_filter("trace", str(c.__struct_config__.tag)) for c in trace_events}
    for service in SOURCES:
        own = {c for c in WRITES[service] if issubclass(c, ev.TraceEvent)}  # type: ignore[index]
        allowed = set(publish_allow(names, service)) & every  # type: ignore[arg-type]
        assert allowed == {names.type_filter("trace", str(c.__struct_config__.tag)) for c in own}
