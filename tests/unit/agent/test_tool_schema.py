"""The @tool decorator builds the offered JSON schema from type hints and the docstring."""

from __future__ import annotations

from typing import Literal

import pytest
from jsonschema import Draft202012Validator
from longhaul.agent.tools import ToolContext, ToolResult, tool
from pydantic import ValidationError

from tests.unit.agent.support import tool_context


@tool(read_only=True)
async def search(
    ctx: ToolContext,
    query: str,
    limit: int = 10,
    kinds: list[Literal["code", "docs"]] | None = None,
) -> str:
    """Search the index.

    A second paragraph that continues the description.

    Args:
        query: what to look for.
        limit: at most this many hits,
            counted after de-duplication.
        kinds: restrict to these kinds.
    """
    return f"{query}:{limit}:{kinds}"


def test_description_is_the_docstring_before_sections() -> None:
    assert search.name == "search"
    assert search.description == (
        "Search the index.\n\nA second paragraph that continues the description."
    )


def test_schema_has_types_defaults_descriptions_and_required() -> None:
    schema = search.input_schema
    props = schema["properties"]
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert props["query"] == {"type": "string", "description": "what to look for."}
    assert props["limit"]["type"] == "integer" and props["limit"]["default"] == 10
    assert props["limit"]["description"] == (
        "at most this many hits, counted after de-duplication."
    )
    kinds = props["kinds"]["anyOf"][0]
    assert kinds == {"type": "array", "items": {"enum": ["code", "docs"], "type": "string"}}
    assert "ctx" not in props
    assert "title" not in schema and all("title" not in p for p in props.values())
    Draft202012Validator.check_schema(schema)


def test_spec_is_offered_with_the_schema() -> None:
    spec = search.spec
    assert spec.name == "search" and spec.parameters is search.input_schema
    assert search.read_only


async def test_run_validates_coerces_and_wraps_strings(tmp_path) -> None:
    reply = await search.run(tool_context(tmp_path), {"query": "x", "limit": "3"})
    assert reply == ToolResult(output="x:3:None")
    with pytest.raises(ValidationError):
        await search.run(tool_context(tmp_path), {"query": "x", "bogus": 1})


def test_decorator_without_context_and_with_options() -> None:
    @tool(name="shout", description="Upper-case text.")
    def loud(text: str) -> str:
        return text.upper()

    assert loud.name == "shout" and loud.description == "Upper-case text."
    assert not loud.wants_context
    assert loud.input_schema["required"] == ["text"]


def test_path_params_must_name_parameters() -> None:
    with pytest.raises(TypeError, match="path_params"):

        @tool(path_params=("nope",))
        async def broken(path: str) -> str:
            return path
