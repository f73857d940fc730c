"""The verification config of a trace or phase (``TraceConfig.verification`` or
``VerificationRequested.method``), validated with jsonschema before anything runs.

One dict can ask for several checks at once; all of them must pass::

    {"json_schema": {...}}                                  # the answer is JSON matching it
    {"command": "pytest -q", "timeout_s": 300, "output_cap": 65536, "cwd": "sub/dir"}
    {"judge": {"criteria": [...], "rubric": "...", "model": "...", "pass_score": 7}}
    {"criteria": [...]}                                     # shorthand for a judge

Keys this service does not know (e.g. the executor's ``max_reinjections``) are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema

DEFAULT_TIMEOUT_S = 300.0
DEFAULT_OUTPUT_CAP = 64 * 1024
DEFAULT_PASS_SCORE = 7.0

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "json_schema": {"type": "object"},
        "command": {
            "anyOf": [
                {"type": "string", "minLength": 1},
                {**_STRINGS, "minItems": 1},
            ]
        },
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
        "output_cap": {"type": "integer", "minimum": 256},
        "cwd": {"type": "string"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
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


def parse_spec(config: dict[str, Any] | None) -> VerificationSpec:
    """The checks ``config`` asks for; raises :class:`InvalidVerificationConfig`."""
    if not config:
        return VerificationSpec()
    try:
        jsonschema.validate(config, CONFIG_SCHEMA)
        if "json_schema" in config:
            jsonschema.Draft202012Validator.check_schema(config["json_schema"])
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "config"
        raise InvalidVerificationConfig(f"{where}: {exc.message}") from exc
    except jsonschema.SchemaError as exc:
        raise InvalidVerificationConfig(f"json_schema is not a schema: {exc.message}") from exc
    command = None
    if "command" in config:
        command = CommandCheck(
            command=config["command"],
            timeout_s=float(config.get("timeout_s", DEFAULT_TIMEOUT_S)),
            output_cap=int(config.get("output_cap", DEFAULT_OUTPUT_CAP)),
            cwd=config.get("cwd"),
            env=dict(config.get("env", {})),
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
