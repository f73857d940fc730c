"""Ask a model for a JSON answer that matches a schema, and check it with jsonschema.

Providers pass ``response_schema`` on natively where they can, but none guarantees it, so the
answer is always parsed (a fenced ```json block is accepted: models like to wrap answers) and
validated. An invalid answer is sent back with the errors, as the next turn of the same
conversation, so the model can repair it; after ``repairs`` tries the call fails for good.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import ChatMessage, Model, ModelError, ModelRequest, ModelResponse
from longhaul.llm.untrusted_schema import UntrustedSchemaError, untrusted_validator
from referencing.exceptions import Unresolvable

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n\s*```", re.DOTALL)
MAX_REPORTED_ERRORS = 10


class StructuredAnswerError(ModelError):
    """The model did not produce a valid JSON answer (after the allowed repairs)."""


def extract_json(text: str) -> Any:
    """The JSON value in ``text`` (whole text or a fenced block); ``ValueError`` if none."""
    candidates = [text.strip(), *(match.group(1) for match in _FENCE.finditer(text))]
    first_error: ValueError | None = None
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError as exc:
            first_error = first_error or exc
    raise ValueError(f"not JSON: {first_error}")


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Human-readable jsonschema errors (``path: message``), most relevant first. The schema
    may come from a client: nothing is fetched, patterns match in linear time, and a schema
    that cannot be used raises :class:`UntrustedSchemaError`."""
    validator = untrusted_validator(schema)
    try:
        found = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    except Unresolvable as exc:
        raise UntrustedSchemaError(f"a reference in the schema does not resolve: {exc}") from exc
    errors = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
        for e in found[:MAX_REPORTED_ERRORS]
    ]
    if len(found) > MAX_REPORTED_ERRORS:
        errors.append(f"... and {len(found) - MAX_REPORTED_ERRORS} more")
    return errors


async def complete_json(
    model: Model,
    messages: list[ChatMessage],
    schema: dict[str, Any],
    *,
    system: str = "",
    timeout_s: float = 120.0,
    repairs: int = 1,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> tuple[Any, ModelResponse]:
    """The validated JSON value and the response that carried it.

    Raises :class:`StructuredAnswerError` when no valid answer came, :class:`ModelError` when
    the call itself failed, ``TimeoutError`` after ``timeout_s`` per call.
    """
    conversation = list(messages)
    problems: list[str] = []
    for _ in range(repairs + 1):
        request = ModelRequest(
            model=model.name,
            messages=conversation,
            system_stable=system,
            response_schema=schema,
            temperature=temperature,
            max_tokens=max_tokens,
        )
        response = await asyncio.wait_for(traced_complete(model, request), timeout=timeout_s)
        try:
            value = extract_json(response.content)
        except ValueError as exc:
            problems = [str(exc)]
        else:
            problems = schema_errors(value, schema)
            if not problems:
                return value, response
        conversation = [
            *conversation,
            {"role": "assistant", "content": response.content},
            {
                "role": "user",
                "content": "Your answer is not valid:\n- "
                + "\n- ".join(problems)
                + "\nAnswer again with only the corrected JSON.",
            },
        ]
    raise StructuredAnswerError("invalid structured answer: " + "; ".join(problems))
