"""What a client may set for a trace, declared once.

``TraceSettings`` is the one declaration: the create bodies' settings fields
(``POST /api/traces``, ``POST /api/runs``) are derived from it by the gateway, ``longhaul run``
takes its flags' bounds and help from it, and the standalone client's ``TraceSettings`` model
is checked against it field for field. Constraints and descriptions ride on the types as
``msgspec.Meta``, so the API refuses what the domain would. A new setting is one line here
and its field on the log (``TraceConfig``, the event's own shape, which old traces decode).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from longhaul.domain.events import ClientTool, ModelParams, OutputSchema, TraceConfig

MODEL_SPEC = r"[A-Za-z0-9_.:/@+?=&-]{1,199}"
MODEL_PATTERN = rf"^[A-Za-z][A-Za-z0-9_.-]{{0,31}}:{MODEL_SPEC}$"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

Name = Annotated[
    str,
    msgspec.Meta(
        pattern=NAME_PATTERN,
        description="a preset, tool or skill name: letters, digits, _ . : - (max 64)",
    ),
]
ModelName = Annotated[
    str,
    msgspec.Meta(
        pattern=MODEL_PATTERN,
        description="provider:model, e.g. openai:gpt-4o-mini, scripted:auto",
    ),
]
Text = Annotated[str, msgspec.Meta(max_length=200_000)]
Iterations = Annotated[int, msgspec.Meta(ge=1, le=100_000)]
TokenCount = Annotated[int, msgspec.Meta(ge=1, le=2**53)]
Dollars = Annotated[float, msgspec.Meta(ge=0)]
Temperature = Annotated[float, msgspec.Meta(ge=0, le=2)]
Names = Annotated[list[Name], msgspec.Meta(max_length=256)]


class Approval(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    tools: list[Name] | Literal["*"]
    """Tools whose calls wait for a person's decision; ``"*"``: every tool."""

    def listed(self) -> list[str]:
        """As ``TraceConfig.approval`` records it."""
        return ["*"] if self.tools == "*" else list(self.tools)


class Verification(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """Checks a proposed final answer must pass (all of them)."""

    check: Name | None = None
    json_schema: dict[str, Any] | None = None
    criteria: Annotated[list[Text], msgspec.Meta(max_length=64)] | None = None


class TraceSettings(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A trace's settings as a client states them (``None``: the preset's, else the config's)."""

    model: Annotated[ModelName | None, msgspec.Meta(description="default: LONGHAUL_MODEL")] = None
    model_fallback: Annotated[
        Annotated[list[ModelName], msgspec.Meta(max_length=8)] | None,
        msgspec.Meta(
            description="models to move to, in order, when the model's provider is down "
            "(default: the preset's chain, else models.fallback for the default model)"
        ),
    ] = None
    preset: Name | None = None
    tools: Names | None = None
    skills: Names | None = None
    max_iterations: Iterations | None = None
    max_tokens: TokenCount | None = None
    max_cost: Dollars | None = None
    on_limit: Annotated[
        Literal["stop", "ask"],
        msgspec.Meta(
            description="at max_tokens / max_cost: stop the run, or ask (a budget wait in "
            "GET /api/inbox, answered with POST /api/traces/{id}/budget)"
        ),
    ] = "stop"
    temperature: Temperature | None = None
    system_prompt: Text | None = None
    model_params: ModelParams | None = None
    auto_execute_tools: Annotated[
        bool,
        msgspec.Meta(
            description="false: every tool call waits for the client, which runs it and posts "
            "the result to POST /api/traces/{id}/tool_results"
        ),
    ] = True
    approval: Annotated[
        Approval | None,
        msgspec.Meta(
            description="calls to these tools wait for POST /api/traces/{id}/approve "
            "(default: the preset's list, usually none); children inherit it"
        ),
    ] = None
    verification: Annotated[
        Verification | None,
        msgspec.Meta(description='verify the final answer, e.g. {"check": "tests"}'),
    ] = None
    messaging: Annotated[
        bool,
        msgspec.Meta(
            description="give the trace an inbox (POST /api/traces/{id}/inbox) and the "
            "check_messages / send_message tools; its sub-traces inherit it"
        ),
    ] = False
    experiences: Annotated[
        bool | None,
        msgspec.Meta(
            description="start with the key's matching experiences in the first message "
            "(default: the preset's setting, usually on)"
        ),
    ] = None

    client_tools: Annotated[
        Annotated[list[ClientTool], msgspec.Meta(max_length=128)] | None,
        msgspec.Meta(
            description="tools the client runs (its own functions): offered to the model "
            "beside the trace's; a call of one waits for POST /api/traces/{id}/tool_results"
        ),
    ] = None
    output_schema: Annotated[
        OutputSchema | None,
        msgspec.Meta(
            description="the final answer must be JSON matching this schema: sent to the "
            "provider in its own form and checked when the model answers"
        ),
    ] = None

    def config(self) -> TraceConfig:
        """The ``trace_created`` config these settings give: every setting by its name, the
        three whose log shape differs (the preset's default name, approval's list,
        verification's object) converted."""
        values = msgspec.to_builtins(self)  # omit_defaults: what was not set stays unset
        if self.approval is not None:
            values["approval"] = self.approval.listed()
        if values.get("verification") == {}:
            del values["verification"]
        return msgspec.convert(values, TraceConfig)


SETTINGS = frozenset(TraceSettings.__struct_fields__)
"""Names of every trace setting (a create body's fields beyond its messages, name, files)."""
