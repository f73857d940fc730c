"""The environment of service subprocesses started by tests and benches."""

from __future__ import annotations

import os

SCRIPTED_DIR_VAR = "LONGHAUL_MODELS__SCRIPTED_DIR"
"""Where ``scripted:<file>`` models may be read from: the test session's temp root, so every
script a test writes under its ``tmp_path`` is allowed and nothing else is."""


def service_env() -> dict[str, str]:
    """Our environment without stray ``LONGHAUL_*`` settings, keeping the scripted-model
    directory the session allows."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LONGHAUL_")}
    if SCRIPTED_DIR_VAR in os.environ:
        env[SCRIPTED_DIR_VAR] = os.environ[SCRIPTED_DIR_VAR]
    return env
