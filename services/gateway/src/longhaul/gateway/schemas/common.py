"""Constrained scalar types and the base classes shared by the request models.

Names that reach the executor (presets, tools, skills) never contain ``/`` or whitespace, so
no request can smuggle a path into a lookup; ids are checked against the subject-safe
alphabet before they are used in a NATS subject.
"""

from __future__ import annotations

from typing import Annotated, Any

from longhaul.domain.settings import MODEL_PATTERN, NAME_PATTERN
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

Name = Annotated[
    str,
    StringConstraints(pattern=NAME_PATTERN),
    Field(description="a preset, tool or skill name: letters, digits, _ . : - (max 64)"),
]
ModelName = Annotated[
    str,
    StringConstraints(pattern=MODEL_PATTERN),
    Field(description="provider:model, e.g. openai:gpt-4o-mini, scripted:auto"),
]
Text = Annotated[str, StringConstraints(max_length=200_000)]
ShortText = Annotated[str, StringConstraints(max_length=200)]


def integral(value: Any) -> Any:
    """JSON Schema counts ``7.0`` as an integer; so do we (``7.5`` still fails)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Strict integers that also take integral JSON numbers written with a fraction. The bounds
# come before the validator so they reach the JSON schema as ``minimum``/``maximum``.
Iterations = Annotated[int, Field(ge=1, le=100_000), BeforeValidator(integral)]
TokenCount = Annotated[int, Field(ge=1, le=2**53), BeforeValidator(integral)]
Sequence = Annotated[int, Field(ge=1, le=2**53), BeforeValidator(integral)]
Counter = Annotated[int, Field(ge=0, le=2**31), BeforeValidator(integral)]
ResponseTokens = Annotated[int, Field(ge=1, le=1_000_000), BeforeValidator(integral)]
Seed = Annotated[int, Field(ge=0, le=2**32 - 1), BeforeValidator(integral)]
Amount = Annotated[int, Field(ge=0, le=2**53), BeforeValidator(integral)]


class Input(BaseModel):
    """Base of every request model: strict types, so ``"temperature": false`` or
    ``"max_iterations": "7"`` are refused rather than coerced into something the client did
    not say."""

    model_config = ConfigDict(strict=True)


class Body(Input):
    """A top-level request body: also rejects unknown fields, so a typo such as
    ``after_seq`` cannot silently turn a rewind into a continue."""

    model_config = ConfigDict(strict=True, extra="forbid")
