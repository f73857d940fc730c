"""A create body's settings fields, derived from the domain's ``TraceSettings``.

``with_settings`` adds to a body the ``TraceSettings`` fields it takes (``POST /api/traces``:
all of them; ``POST /api/runs``: the ones a routed run can use), with the domain's constraints
(``derived.input_fields``); ``SettingsBody.settings()`` turns a body back into the domain's
value. The request models of the structs inside the settings live here, since their refusals
are the API's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, Self

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.settings import SETTINGS, Approval, TraceSettings, Verification
from longhaul.domain.verification import verification_errors
from longhaul.gateway.schemas.common import Body, Name, ResponseTokens, Seed, Text
from longhaul.gateway.schemas.derived import input_fields
from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator


class NamedToolChoice(Body):
    name: Name


class ModelParamsBody(Body):
    """Sent with every model call of the trace, mapped per provider (Anthropic
    ``tool_choice`` {type: auto|any|tool}, Gemini ``toolConfig.functionCallingConfig``).
    Unknown keys are refused (422)."""

    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    max_tokens: ResponseTokens | None = Field(default=None, description="per response")
    seed: Seed | None = None
    stop: list[Annotated[str, Field(min_length=1, max_length=256)]] | None = Field(
        default=None, max_length=16
    )
    tool_choice: Literal["auto", "required", "none"] | NamedToolChoice | None = Field(
        default=None, description="auto | required | none | {name}: must call that tool"
    )
    parallel_tool_calls: bool | None = Field(
        default=None, description="false: at most one tool call per model response"
    )


class ClientToolBody(Body):
    """A tool the client runs: offered to the model beside the trace's own tools; its calls
    wait for POST /api/traces/{id}/tool_results (wait_reason client_tools)."""

    name: Name
    description: Text = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="the arguments' JSON schema (an object); nothing it names is fetched",
    )


class OutputSchemaBody(Body):
    schema_: dict[str, Any] = Field(
        alias="schema", description='the JSON schema of the answer ({"type": "object"}: any object)'
    )
    name: Name = "response"
    strict: bool = Field(
        default=False,
        description="ask the provider to enforce it exactly (OpenAI strict, Anthropic "
        "output_config); the schema then keeps to their common subset",
    )

    model_config = ConfigDict(strict=True, extra="forbid", populate_by_name=True)


class ApprovalBody(Body):
    tools: list[Name] | Literal["*"] = Field(
        description='tools whose calls wait for a person\'s decision; "*": every tool'
    )


class VerificationBody(Body):
    """Checks a proposed final answer must pass (all of them), with the failure re-injected
    up to ``pipeline.verification.max_reinjections`` times before the trace fails. Commands
    are the operator's: ``check`` names one of ``verifier.commands``; a raw ``command`` is
    refused (422)."""

    check: Name | None = Field(default=None, description="an operator-configured command check")
    json_schema: dict[str, Any] | None = Field(
        default=None, description="the answer must be JSON matching this schema"
    )
    criteria: list[Text] | None = Field(
        default=None, max_length=64, description="a model judge scores the answer against these"
    )

    @model_validator(mode="before")
    @classmethod
    def _no_commands(cls, data: Any) -> Any:
        errors = verification_errors(data) if isinstance(data, dict) else []
        if errors:
            raise ValueError("; ".join(errors))
        return data


SETTINGS_BODIES: dict[type[msgspec.Struct], type[BaseModel]] = {
    ev.ModelParams: ModelParamsBody,
    ev.ClientTool: ClientToolBody,
    ev.OutputSchema: OutputSchemaBody,
    Approval: ApprovalBody,
    Verification: VerificationBody,
}
"""The request model of each struct inside ``TraceSettings``: they refuse with the API's
messages (a raw verification command, a named tool choice's shape)."""


class SettingsBody(Body):
    """A create body whose settings fields are ``TraceSettings``'s (``with_settings``)."""

    @classmethod
    def stating(cls, settings: TraceSettings, **fields: Any) -> Self:
        """A body of ``fields`` stating ``settings``, checked as a client's body would be."""
        return cls.model_validate({**fields, **msgspec.to_builtins(settings)})

    def settings(self) -> TraceSettings:
        """The settings this body states, as the domain holds them."""
        return msgspec.convert(
            self.model_dump(include=set(SETTINGS) & set(type(self).model_fields), by_alias=True),
            TraceSettings,
        )


def with_settings(
    name: str,
    base: type[SettingsBody],
    names: Iterable[str] = SETTINGS,
    descriptions: dict[str, str] | None = None,
) -> Any:
    """``base`` with the ``TraceSettings`` fields named in ``names`` (declared once, in the
    domain): the model the API shows as ``name``."""
    fields = input_fields(TraceSettings, names, bodies=SETTINGS_BODIES, descriptions=descriptions)
    return create_model(
        name, __base__=base, __module__=base.__module__, __doc__=base.__doc__, **fields
    )
