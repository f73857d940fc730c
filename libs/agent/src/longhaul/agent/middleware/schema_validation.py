"""ToolSchemaValidation (wrap_tool_call): arguments are checked against the tool's
``input_schema`` (JSON Schema Draft 2020-12) before anything runs.

A failure never reaches the tool. It comes back typed so the model can fix the call:
``schema_mismatch`` when a field is missing or unknown (the call has the wrong shape),
``tool_call_invalid`` when a value has the wrong type or is out of range, or the arguments are
not JSON at all. The details name each offending path and the schema is repeated.
"""

from __future__ import annotations

import json

from jsonschema import ValidationError as SchemaError
from longhaul.agent.errors import ToolError
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.messages import failure
from longhaul.agent.middleware.base import Middleware, ToolHandler
from longhaul.agent.tools.result import ToolReply
from longhaul.agent.turn import Turn

STRUCTURAL = frozenset({"required", "additionalProperties", "unevaluatedProperties"})


def _where(error: SchemaError) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def classify(errors: list[SchemaError]) -> str:
    structural = any(error.validator in STRUCTURAL for error in errors)
    return "schema_mismatch" if structural else "tool_call_invalid"


class ToolSchemaValidation(Middleware):
    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        tool = invocation.tool
        if tool is None:
            return await call_next(invocation)
        try:
            arguments = invocation.arguments()
        except ToolError as exc:
            return failure(exc.code, str(exc))
        errors = sorted(tool.validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return await call_next(invocation)
        details = "\n".join(f"- {_where(error)}: {error.message}" for error in errors)
        schema = json.dumps(tool.input_schema, sort_keys=True)
        return failure(
            classify(errors),
            f"invalid arguments for {tool.name}; the tool did not run:\n{details}\n"
            f"Expected schema: {schema}",
        )
