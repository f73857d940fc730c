"""The verification config of a trace or phase (``TraceConfig.verification`` or
``VerificationRequested.method``), validated with jsonschema before anything runs.

One dict can ask for several checks at once; all of them must pass::

    {"json_schema": {...}}                                  # the answer is JSON matching it
    {"check": "tests"}                # the operator's command check verifier.commands["tests"]
    {"judge": {"criteria": [...], "rubric": "...", "model": "...", "pass_score": 7}}
    {"criteria": [...]}                                     # shorthand for a judge

A raw command (``command``, ``cwd``, ``env``, ``timeout_s``, ``output_cap``) is refused: the
commands are the operator's (:mod:`longhaul.domain.verification`), so a config carrying one
that reached the log anyway fails verification without running anything.

Keys this service does not know (e.g. the executor's ``max_reinjections``) are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from longhaul.domain.config import VerifierCommand
from longhaul.domain.verification import verification_errors
from longhaul.llm.untrusted_schema import UntrustedSchemaError, untrusted_validator

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_OUTPUT_CAP = 64 * 1024
DEFAULT_PASS_SCORE = 7.0

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "json_schema": {"type": "object"},
        "check": {"type": "string", "minLength": 1},
        "criteria": _STRINGS,
        "judge": {
            "anyOf": [
                {"type": "boolean"},
                {
                    "type": "object",
                    "properties": {
                        "criteria": _STRINGS,
                        "rubric": {"type": "string"},
                        "model": {"type": "string", "minLength": 1},
                        "pass_score": {"type": "number", "minimum": 0, "maximum": 10},
                    },
                },
            ]
        },
    },
}


class InvalidVerificationConfig(ValueError):
    """The config cannot be run; the trace gets a failed verification saying why."""


@dataclass(frozen=True)
class CommandCheck:
    command: str | list[str]
    timeout_s: float = DEFAULT_TIMEOUT_S
    output_cap: int = DEFAULT_OUTPUT_CAP
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeCheck:
    criteria: list[str]
    rubric: str = ""
    model: str | None = None
    pass_score: float = DEFAULT_PASS_SCORE


@dataclass(frozen=True)
class VerificationSpec:
    json_schema: dict[str, Any] | None = None
    command: CommandCheck | None = None
    judge: JudgeCheck | None = None


def parse_spec(
    config: dict[str, Any] | None, commands: Mapping[str, VerifierCommand] | None = None
) -> VerificationSpec:
    """The checks ``config`` asks for, its ``check`` looked up in the operator's
    ``commands``; raises :class:`InvalidVerificationConfig`."""
    if not config:
        return VerificationSpec()
    commands = commands or {}
    refused = verification_errors(config, commands)
    if refused:
        raise InvalidVerificationConfig("; ".join(refused))
    try:
        jsonschema.validate(config, CONFIG_SCHEMA)
        if "json_schema" in config:
            untrusted_validator(config["json_schema"])
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "config"
        raise InvalidVerificationConfig(f"{where}: {exc.message}") from exc
    except UntrustedSchemaError as exc:
        raise InvalidVerificationConfig(f"json_schema cannot be used: {exc}") from exc
    command = None
    if "check" in config:
        operator = commands[config["check"]]
        command = CommandCheck(
            command=operator.command,
            timeout_s=operator.timeout_s,
            output_cap=operator.output_cap,
            cwd=operator.cwd,
            env=dict(operator.env),
        )
    return VerificationSpec(
        json_schema=config.get("json_schema"), command=command, judge=_judge(config)
    )


def _judge(config: dict[str, Any]) -> JudgeCheck | None:
    judge = config.get("judge")
    if judge is False:
        return None
    settings: dict[str, Any] = judge if isinstance(judge, dict) else {}
    criteria = list(settings.get("criteria") or config.get("criteria") or [])
    if judge is None and not criteria:
        return None
    if not criteria:
        raise InvalidVerificationConfig("judge: needs at least one acceptance criterion")
    return JudgeCheck(
        criteria=criteria,
        rubric=settings.get("rubric", ""),
        model=settings.get("model"),
        pass_score=float(settings.get("pass_score", DEFAULT_PASS_SCORE)),
    )
