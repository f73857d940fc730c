"""What a client may ask a verifier to check, and what only the operator may.

A verification config (``TraceConfig.verification``, a phase's ``verification``) comes from
a client, a plan or a planner model. It may ask for a JSON-schema check (``json_schema``), a
model judge (``criteria`` / ``judge``) and one of the operator's command checks by name::

    {"check": "tests"}            # runs config verifier.commands["tests"]

Commands, their directory, environment, timeout and output cap are the operator's alone
(``verifier.commands: {name: {command, cwd, timeout_s, output_cap, env}}``): a config that
carries any of those keys is refused — with 422 at the gateway, as an invalid plan by the
planner, and as a failed verification by the verifier if one reaches the log anyway.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

OPERATOR_ONLY = ("command", "cwd", "env", "timeout_s", "output_cap")
"""Keys of a command check that only ``verifier.commands`` may set."""


def verification_errors(config: Any, checks: Collection[str] | None = None) -> list[str]:
    """Why ``config`` cannot be accepted from a client (empty: it can). ``checks`` are the
    operator's command names; ``None`` skips the name lookup (a service without the list)."""
    if config is None:
        return []
    if not isinstance(config, dict):
        return ["verification: must be an object"]
    errors = [
        f"verification.{key}: commands are the operator's; name a configured check "
        'instead ({"check": "<name>"}, config verifier.commands)'
        for key in OPERATOR_ONLY
        if key in config
    ]
    if "check" in config:
        name = config["check"]
        if not isinstance(name, str) or not name:
            errors.append("verification.check: must be the name of a configured check")
        elif checks is not None and name not in checks:
            known = ", ".join(sorted(checks)) or "none configured"
            errors.append(f"verification.check: no check named {name!r} (known: {known})")
    return errors
