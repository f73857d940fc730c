"""What a client may ask a verification to do: the domain's rules (no commands of its own, a
configured check by name) and a ``json_schema`` the verifier can use safely (nothing fetched,
patterns in linear time) — refused at the door, so nothing unusable reaches the log."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from longhaul.domain.verification import verification_errors
from longhaul.llm.untrusted_schema import UntrustedSchemaError, untrusted_validator


def verification_problems(config: Any, checks: Collection[str]) -> list[str]:
    errors = verification_errors(config, checks)
    schema = config.get("json_schema") if isinstance(config, dict) else None
    if isinstance(schema, dict):
        try:
            untrusted_validator(schema)
        except UntrustedSchemaError as exc:
            errors.append(f"verification.json_schema cannot be used: {exc}")
    return errors
