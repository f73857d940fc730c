"""What the repository tracks: no cache or output committed by mistake.

A crash cache of 82 MB (`.schemathesis/`) was once committed unnoticed; every clone carried it.
A tracked file over 1 MB must be named here, with the reason it belongs in the repository.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 1024 * 1024

# path -> why it is tracked although large
INTENDED_LARGE: dict[str, str] = {}


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"],
        check=True,
        capture_output=True,
        timeout=30,
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def test_no_tracked_file_is_over_one_megabyte_unless_intended() -> None:
    oversized = {
        name: (ROOT / name).stat().st_size
        for name in _tracked_files()
        if (ROOT / name).is_file() and (ROOT / name).stat().st_size > LIMIT_BYTES
    }
    unexpected = {name: size for name, size in oversized.items() if name not in INTENDED_LARGE}
    assert not unexpected, f"tracked files over 1 MB, not listed as intended: {unexpected}"


def test_caches_are_ignored() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    for cache in (".schemathesis/", ".hypothesis/", ".pytest_cache/", ".venv/"):
        assert cache in ignored, f"{cache} is not in .gitignore"
    tracked_caches = [
        n for n in _tracked_files() if n.startswith((".schemathesis/", ".hypothesis/"))
    ]
    assert not tracked_caches, tracked_caches
