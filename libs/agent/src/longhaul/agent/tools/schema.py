"""A tool's argument model and JSON schema, derived from its signature and docstring.

The pydantic model is what validates and coerces arguments before the function runs; the JSON
schema (Draft 2020-12, as pydantic emits it) is what the model is offered and what the
ToolSchemaValidation middleware checks raw arguments against. Unknown arguments are refused
(``additionalProperties: false``) so that a misspelt field is reported, not silently ignored.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.docstring import Docstring
from pydantic import BaseModel, ConfigDict, Field, create_model


class ArgsModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


def takes_context(fn: Callable[..., Any]) -> bool:
    """True when the first parameter is annotated :class:`ToolContext`."""
    params = list(inspect.signature(fn).parameters.values())
    if not params:
        return False
    hints = typing.get_type_hints(fn)
    return hints.get(params[0].name) is ToolContext


def args_model(fn: Callable[..., Any], name: str, doc: Docstring) -> type[ArgsModel]:
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())
    if takes_context(fn):
        params = params[1:]
    fields: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {name}: *args/**kwargs cannot be described by a schema")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=doc.params.get(param.name)))
    model: type[ArgsModel] = create_model(f"{name}_arguments", __base__=ArgsModel, **fields)
    return model


def _strip_titles(node: Any) -> None:
    """Pydantic titles repeat the field names; they cost tokens and say nothing."""
    if isinstance(node, dict):
        node.pop("title", None)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop in value.values():
                    _strip_titles(prop)
            elif key != "properties":
                _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Local ``$ref``s replaced by their definitions: not every provider resolves them
    (Gemini's function declarations take no ``$defs``); tool arguments are never recursive."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline_refs(value, defs) for key, value in node.items() if key != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    return node


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema = _inline_refs(schema, schema.get("$defs", {}))
    _strip_titles(schema)
    schema.setdefault("properties", {})
    return schema
