"""Start a run: check what a create body asks for and append its ``trace_created``.

The one way every surface starts a trace — ``POST /api/traces``, ``/api/runs``, ``/v1``,
``/mcp``, ``/a2a``, schedules, triggers and evals — so a check added here holds for all.
"""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.agent.images import offload_images
from longhaul.domain import events as ev
from longhaul.domain.state import TraceState
from longhaul.gateway import commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.traces import (
    ApprovalBody,
    ChatMessage,
    ClientToolBody,
    CreateTraceRequest,
    ModelParamsBody,
    OutputSchemaBody,
    VerificationBody,
)
from longhaul.gateway.usecases.files import create_with_files
from longhaul.gateway.verification import verification_problems
from longhaul.llm.registry import check_model_string
from longhaul.llm.untrusted_schema import UntrustedSchemaError, untrusted_validator


async def start_run(
    runtime: Runtime,
    principal: Principal,
    body: CreateTraceRequest,
    idempotency_key: str | None = None,
) -> tuple[str, int]:
    """(trace id, event id) of the run ``body`` starts; a repeat of an ``idempotency_key``
    (per key) starts nothing and answers what the first request answered."""
    trace_id = None
    if idempotency_key is not None:
        trace_id = commands.keyed_trace_id(principal.owner, idempotency_key)
        seq = await commands.keyed_creation(runtime, principal, trace_id)
        if seq is not None:
            return trace_id, seq
    state = await start_trace(runtime, principal, body, trace_id)
    return state.trace_id, state.stream_seq


async def message_inputs(
    runtime: Runtime, principal: Principal, messages: list[ChatMessage]
) -> list[ev.InputMessage]:
    """The messages as events carry them: a long ``data:`` image URL is stored in the
    workspace and named by reference (``longhaul.agent.images``)."""
    raw = [m.model_dump(exclude_none=True) for m in messages]
    async with runtime.nats_call():
        workspace = runtime.service.workspace
        raw = await offload_images(raw, principal.owner, workspace.put)
    return [msgspec.convert(m, ev.InputMessage) for m in raw]


async def start_trace(
    runtime: Runtime,
    principal: Principal,
    body: CreateTraceRequest,
    trace_id: str | None = None,
) -> TraceState:
    """Check and start the trace ``body`` describes: the one way every surface (this API,
    ``/v1``, ``/mcp``) starts a run."""
    event = await trace_creation(runtime, principal, body)
    files = [(f.name, f.content, f.media_type) for f in body.files]
    return await create_with_files(runtime, principal, event, files, trace_id)


async def trace_creation(
    runtime: Runtime, principal: Principal, body: CreateTraceRequest
) -> ev.TraceCreated:
    """The ``trace_created`` event a create body asks for (model and verification checked)."""
    check_model(runtime, body.model)
    for index, model in enumerate(body.model_fallback or []):
        check_model(runtime, model, field=f"model_fallback[{index}]")
    verification = _verification(runtime, body.verification)
    config = ev.TraceConfig(
        model=body.model,
        model_fallback=body.model_fallback,
        tools=body.tools,
        skills=body.skills or [],
        max_iterations=body.max_iterations,
        max_tokens=body.max_tokens,
        max_cost=body.max_cost,
        temperature=body.temperature,
        system_prompt=body.system_prompt,
        model_params=None if body.model_params is None else model_params(body.model_params),
        approval=_approval(body.approval),
        auto_execute_tools=body.auto_execute_tools,
        verification=verification,
        messaging=body.messaging,
        experiences=body.experiences,
        client_tools=client_tools(body.client_tools),
        output_schema=output_schema(body.output_schema),
    )
    if body.preset:
        config.preset = body.preset
    messages = await message_inputs(runtime, principal, body.messages)
    return ev.TraceCreated(
        messages=messages,
        config=config,
        name=body.name or _title(messages),
        untitled=not body.name,
    )


def check_model(runtime: Runtime, model: str | None, *, field: str | None = None) -> None:
    """Refuse a model string no run could use (a script outside models.scripted_dir…);
    ``field`` names where it was (a fallback chain's entry)."""
    if model is None:
        return
    try:
        check_model_string(model, runtime.config.models)
    except ValueError as exc:
        message = f"{field}: {exc}" if field else str(exc)
        raise ApiError(422, "invalid_model", message) from None


def _verification(runtime: Runtime, body: VerificationBody | None) -> dict[str, Any] | None:
    """The trace's verification config; a check the operator did not configure is 422."""
    if body is None:
        return None
    config = body.model_dump(exclude_none=True)
    errors = verification_problems(config, runtime.config.verifier.commands)
    if errors:
        raise ApiError(422, "invalid_verification", "; ".join(errors))
    return config or None


def _approval(body: ApprovalBody | None) -> list[str] | None:
    if body is None:
        return None
    return ["*"] if body.tools == "*" else list(body.tools)


def _title(messages: list[ev.InputMessage], limit: int = 60) -> str | None:
    """A default name for listings: the first user message, on one line, shortened."""
    for message in messages:
        if message.role == "user" and isinstance(message.content, str) and message.content.strip():
            text = " ".join(message.content.split())
            return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return None


def model_params(body: ModelParamsBody) -> ev.ModelParams:
    return msgspec.convert(body.model_dump(exclude_none=True), ev.ModelParams)


def _usable_schema(schema: dict[str, Any], field: str, *, object_only: bool) -> None:
    """A client's schema is checked before it reaches the log: valid, nothing fetched,
    patterns RE2 runs (422 ``invalid_schema``)."""
    try:
        untrusted_validator(schema)
    except UntrustedSchemaError as exc:
        raise ApiError(422, "invalid_schema", f"{field}: {exc}") from None
    if object_only and schema.get("type", "object") != "object":
        raise ApiError(422, "invalid_schema", f"{field}: the arguments' schema must be an object")


def client_tools(bodies: list[ClientToolBody] | None) -> list[ev.ClientTool] | None:
    """The client's tool definitions, their schemas checked; a name twice is 422."""
    if bodies is None:
        return None
    names = [body.name for body in bodies]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ApiError(422, "invalid_tools", f"tools named twice: {', '.join(twice)}")
    for index, body in enumerate(bodies):
        _usable_schema(body.parameters, f"tools[{index}].parameters", object_only=True)
    return [
        ev.ClientTool(name=b.name, description=b.description, parameters=b.parameters)
        for b in bodies
    ]


def output_schema(body: OutputSchemaBody | None) -> ev.OutputSchema | None:
    if body is None:
        return None
    _usable_schema(body.schema_, "output_schema.schema", object_only=False)
    return ev.OutputSchema(schema=body.schema_, name=body.name, strict=body.strict)
