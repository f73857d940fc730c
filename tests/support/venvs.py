"""Test-only Python environments: a venv per pinned set of PyPI packages, made once under the
test cache (``~/.cache/longhaul-tests/venvs``, or ``LONGHAUL_TEST_CACHE``) with the standard
``venv`` and ``pip``, so official clients of another version than the workspace's (a2a-sdk
0.3) run beside it. A lock file keeps two test processes from making one at the same time,
and a marker written last tells a finished venv from one cut short. A test skips with the
reason when PyPI cannot be reached."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

INSTALL_TIMEOUT_S = 600


def venv_with(*requirements: str) -> Path:
    """The ``bin`` directory of a venv holding ``requirements`` (each pinned ``name==v``)."""
    root = os.environ.get("LONGHAUL_TEST_CACHE") or Path.home() / ".cache" / "longhaul-tests"
    cache = Path(root) / "venvs"
    cache.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", "+".join(requirements))
    target, done = cache / name, cache / f"{name}.done"
    with (cache / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return target / "bin"
        shutil.rmtree(target, ignore_errors=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, timeout=120)
            pip = subprocess.run(
                [str(target / "bin" / "python"), "-m", "pip", "install", "-q", *requirements],
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip install {' '.join(requirements)} took over {INSTALL_TIMEOUT_S} s")
        if pip.returncode != 0:
            pytest.skip(f"pip install {' '.join(requirements)} failed: {pip.stderr[-500:]}")
        done.touch()
    return target / "bin"
