"""Start the run a template describes, under an id derived from what caused it.

Schedules and triggers start runs exactly as ``POST /api/traces`` and ``POST /api/tasks`` do
(the same checks, the same per-key active cap), from a ``{"kind", "body"}`` template checked
at creation and again at each start. The run's id is derived from its cause — (schedule,
tick) or (trigger, idempotency key) — and the log's create is exclusive (the first event of an
aggregate is appended only where none is), so a second attempt at the same cause, by another
gateway or after a crash, finds the first run instead of starting another.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import msgspec
from longhaul.core.repository import Recorded
from longhaul.domain import events as ev
from longhaul.gateway import access, commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schedules.records import Template
from longhaul.gateway.schemas.schedules import TemplateBody
from longhaul.gateway.schemas.tasks import CreateTaskRequest
from longhaul.gateway.schemas.traces import CreateTraceRequest
from longhaul.gateway.usecases.start import trace_creation
from longhaul.gateway.usecases.tasks import task_creation
from pydantic import BaseModel, ValidationError

_PREFIX = {"trace": "t_", "task": "task_"}


@dataclass(frozen=True)
class Started:
    run_id: str
    kind: str
    new: bool
    """False: the cause had started it before (nothing started now)."""


def derived_run_id(kind: str, *cause: str) -> str:
    """The run id of a cause: a repeat of the cause names the same run."""
    digest = hashlib.sha256("\0".join(cause).encode()).hexdigest()
    return f"{_PREFIX[kind]}s{digest[:32]}"


def template_body(template: Template) -> BaseModel:
    """The template's body as the route it stands for reads it (422 naming the field)."""
    model: type[BaseModel] = CreateTraceRequest if template.kind == "trace" else CreateTaskRequest
    try:
        body = model.model_validate_json(msgspec.json.encode(template.body))
    except ValidationError as exc:
        details = [
            {"loc": ["template", "body", *err.get("loc", ())], "msg": str(err.get("msg", ""))}
            for err in exc.errors()
        ]
        raise ApiError(
            422, "invalid_request", "template.body is not a valid create body", details
        ) from None
    if isinstance(body, CreateTraceRequest) and body.files:
        # each run would store them again: a template's runs work on files it puts there
        raise ApiError(422, "invalid_request", "a template carries no files")
    return body


async def checked(runtime: Runtime, principal: Principal, given: TemplateBody) -> Template:
    """A request's template, checked as its route checks a body (422 otherwise)."""
    template = Template(kind=given.kind, body=given.body)
    await creation(runtime, principal, template)
    return template


async def creation(runtime: Runtime, principal: Principal, template: Template) -> ev.Event:
    """The creation event the template asks for, checked as its route checks it."""
    body = template_body(template)
    if isinstance(body, CreateTraceRequest):
        return await trace_creation(runtime, principal, body)
    assert isinstance(body, CreateTaskRequest)
    return task_creation(runtime.config, body)


async def start(
    runtime: Runtime,
    owner: str,
    template: Template,
    run_id: str,
    **origin: Any,
) -> Started:
    """Start the run ``run_id`` (``origin``: ``schedule_id`` or ``trigger_id``), or find it."""
    kind = template.kind
    if not runtime.keys.admits(owner):  # a revoked key's schedule or trigger starts nothing
        raise ApiError(401, "unauthorized", f"the key {owner} is not configured here")
    principal = Principal(owner=owner)
    if await started_before(runtime, owner, kind, run_id):
        return Started(run_id, kind, new=False)
    event = msgspec.structs.replace(await creation(runtime, principal, template), **origin)
    try:
        if isinstance(event, ev.TraceCreated):
            await commands.create_trace(runtime, principal, event, run_id)
        else:
            assert isinstance(event, ev.TaskCreated)
            await commands.create_task(runtime, principal, event, run_id)
    except ApiError as exc:
        # a racing twin (another gateway at the same tick) created it first
        if exc.code == "concurrent_update" and await started_before(runtime, owner, kind, run_id):
            return Started(run_id, kind, new=False)
        raise
    return Started(run_id, kind, new=True)


async def started_before(runtime: Runtime, owner: str, kind: str, run_id: str) -> bool:
    """Whether ``run_id`` exists (409 if it is not a run of ``owner``'s: a corrupt log)."""
    async with runtime.nats_call():
        stored = await access.first_stored(runtime, "trace" if kind == "trace" else "task", run_id)
    if stored is None:
        return False
    created = stored.event if isinstance(stored, Recorded) else None
    if not isinstance(created, ev.TraceCreated | ev.TaskCreated) or created.owner != owner:
        raise ApiError(409, "idempotency_conflict", f"run {run_id} belongs to something else")
    return True
