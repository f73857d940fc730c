"""Constrained scalar types shared by the request models.

Names that reach the executor (presets, tools, skills) never contain ``/`` or whitespace, so
no request can smuggle a path into a lookup; ids are checked against the subject-safe
alphabet before they are used in a NATS subject.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

Name = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"),
    Field(description="a preset, tool or skill name: letters, digits, _ . : - (max 64)"),
]
ModelName = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}$"),
    Field(description="provider:model, e.g. openai:gpt-4o-mini, scripted:auto"),
]
Text = Annotated[str, StringConstraints(max_length=200_000)]
ShortText = Annotated[str, StringConstraints(max_length=200)]
