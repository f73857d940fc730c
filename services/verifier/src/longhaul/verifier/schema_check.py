"""JSON-schema check of an answer: it must parse as JSON (a fenced ```json block counts) and
validate against the configured schema. The schema is the client's: it fetches nothing, and
one that cannot be used fails the check with the reason (never retried, never waited on)."""

from __future__ import annotations

from typing import Any

from longhaul.llm.structured import extract_json, schema_errors
from longhaul.llm.untrusted_schema import UntrustedSchemaError
from longhaul.verifier.result import CheckResult


def check_schema(answer: str, schema: dict[str, Any]) -> CheckResult:
    try:
        value = extract_json(answer)
    except ValueError as exc:
        message = f"answer is {exc}"
        return CheckResult("json_schema", passed=False, errors=[message], log=message)
    try:
        errors = schema_errors(value, schema)
    except UntrustedSchemaError as exc:
        message = f"the verification schema cannot be used: {exc}"
        return CheckResult("json_schema", passed=False, errors=[message], log=message)
    log = "answer matches the schema" if not errors else "\n".join(errors)
    return CheckResult("json_schema", passed=not errors, errors=errors, log=log)
