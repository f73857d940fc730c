"""Start a run: check what a create body asks for and append its ``trace_created``.

The one way every surface starts a trace — ``POST /api/traces``, ``/api/runs``, ``/v1``,
``/mcp``, ``/a2a``, schedules, triggers and evals — so a check added here holds for all.
"""

from __future__ import annotations

from typing import Any

import msgspec
from longhaul.agent.images import offload_images
from longhaul.domain import events as ev
from longhaul.domain.settings import Verification
from longhaul.domain.state import TraceState
from longhaul.gateway import commands
from longhaul.gateway.auth import Principal
from longhaul.gateway.errors import ApiError
from longhaul.gateway.runtime import Runtime
from longhaul.gateway.schemas.settings import ClientToolBody, ModelParamsBody, OutputSchemaBody
from longhaul.gateway.schemas.traces import ChatMessage, CreateTraceRequest
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
    settings = body.settings()
    check_model(runtime, settings.model)
    for index, model in enumerate(settings.model_fallback or []):
        check_model(runtime, model, field=f"model_fallback[{index}]")
    check_verification(runtime, settings.verification)
    check_client_tools(settings.client_tools)
    check_output_schema(settings.output_schema)
    messages = await message_inputs(runtime, principal, body.messages)
    return ev.TraceCreated(
        messages=messages,
        config=settings.config(),
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


def check_verification(runtime: Runtime, verification: Verification | None) -> None:
    """A check the operator did not configure is 422."""
    if verification is None:
        return
    errors = verification_problems(
        msgspec.to_builtins(verification), runtime.config.verifier.commands
    )
    if errors:
        raise ApiError(422, "invalid_verification", "; ".join(errors))


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


def check_client_tools(tools: list[ev.ClientTool] | None, field: str = "client_tools") -> None:
    """The client's tool definitions: each name once, each schema usable (422)."""
    names = [tool.name for tool in tools or []]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ApiError(422, "invalid_tools", f"tools named twice: {', '.join(twice)}")
    for index, tool in enumerate(tools or []):
        _usable_schema(tool.parameters, f"{field}[{index}].parameters", object_only=True)


def check_output_schema(output: ev.OutputSchema | None) -> None:
    if output is not None:
        _usable_schema(output.schema, "output_schema.schema", object_only=False)


def client_tools(bodies: list[ClientToolBody] | None) -> list[ev.ClientTool] | None:
    """The client's tool definitions (``/v1`` ``tools``), their schemas checked."""
    if bodies is None:
        return None
    tools = [
        ev.ClientTool(name=b.name, description=b.description, parameters=b.parameters)
        for b in bodies
    ]
    check_client_tools(tools, "tools")
    return tools


def output_schema(body: OutputSchemaBody | None) -> ev.OutputSchema | None:
    if body is None:
        return None
    output = ev.OutputSchema(schema=body.schema_, name=body.name, strict=body.strict)
    check_output_schema(output)
    return output
