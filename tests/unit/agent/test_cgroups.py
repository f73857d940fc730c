"""A cgroup per bash run: memory and processes limited for the whole tree, and nothing it
leaves behind outlives it. Real cgroups; these tests skip (saying why) where this process may
not manage them (no root, no delegated v2 controllers, read-only v1 hierarchies)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from longhaul.agent.tools.cgroups import (
    LEFTOVER_AFTER_S,
    PREFIX,
    Placement,
    placement,
    remove_leftovers,
)
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.domain.config import SandboxConfig

from tests.unit.agent.test_sandbox import run

WHERE = placement()
needs_cgroups = pytest.mark.skipif(
    not isinstance(WHERE, Placement), reason=f"no cgroups for tool runs here: {WHERE}"
)
needs_bwrap = pytest.mark.skipif(
    not Sandbox(SandboxConfig(mode="auto")).confined, reason="no bubblewrap sandbox here"
)

HOLD_100_MB = "python3 -c 'import time; b = b\"x\" * (100 * 2**20); time.sleep(4)'"
FOUR_HOLDERS = (
    f"pids=(); for i in 1 2 3 4; do {HOLD_100_MB} & pids+=($!); done; "
    'for p in "${pids[@]}"; do wait $p; echo "exit $?"; done'
)


def alive(pid: int) -> bool:
    """Running (an exited process may linger as a zombie until its new parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(") ", 1)[1][0] != "Z"


def tool_cgroups() -> list[Path]:
    assert isinstance(WHERE, Placement)
    return [c for parent in WHERE.parents for c in parent.glob("longhaul-tool-*")]


@needs_cgroups
@needs_bwrap
async def test_the_whole_tree_shares_one_memory_limit(tmp_path: Path) -> None:
    """Four processes of 100 MB, each under the per-process limit: together over it."""
    confined = await run(tmp_path, FOUR_HOLDERS, memory_mb=256)
    assert "exit 137" in confined.output  # the cgroup's OOM killer took at least one
    unlimited = await run(tmp_path, FOUR_HOLDERS, memory_mb=256, cgroups=False)
    assert unlimited.output.count("exit 0") == 4, unlimited.output  # setrlimit alone: all fit


@needs_cgroups
async def test_a_root_services_run_is_bounded_in_processes(tmp_path: Path) -> None:
    """Unconfined as root, RLIMIT_NPROC does not apply; the run's pids.max does."""
    # os.fork fails at once when the cgroup is full; bash would retry a failed fork for 15 s
    # and then give up on the whole script, which made the count depend on timing.
    command = (
        "python3 -c 'import os, time\n"
        "started = 0\n"
        "for _ in range(60):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(5)\n"
        "        os._exit(0)\n"
        "    started += 1\n"
        "print(started)'"
    )
    result = await run(tmp_path, command, mode="none", max_processes=30)
    assert int(result.output.split()[0]) < 30, result.output
    free = await run(tmp_path, command, mode="none", max_processes=30, cgroups=False)
    assert int(free.output.split()[0]) == 60, free.output


@needs_cgroups
def test_empty_cgroups_left_by_a_killed_run_are_removed_later(tmp_path: Path) -> None:
    assert isinstance(WHERE, Placement)
    stale = [parent / f"{PREFIX}stale{i}" for i, parent in enumerate(WHERE.parents)]
    fresh = [parent / f"{PREFIX}fresh{i}" for i, parent in enumerate(WHERE.parents)]
    for directory in (*stale, *fresh):
        directory.mkdir()
    old = time.time() - LEFTOVER_AFTER_S - 5
    for directory in stale:
        os.utime(directory, (old, old))
    try:
        assert remove_leftovers(WHERE) >= len(stale)
        assert not any(d.exists() for d in stale) and all(d.exists() for d in fresh)
    finally:
        for directory in (*stale, *fresh):
            if directory.exists():
                directory.rmdir()


@needs_cgroups
async def test_what_a_run_leaves_behind_is_killed_and_its_cgroup_removed(tmp_path: Path) -> None:
    """A process that left the run's session and group (``setsid``) still dies with the run."""
    command = (
        "setsid sleep 300 > /dev/null 2>&1 & echo $!; "
        f"grep -o '{PREFIX}[^/]*' /proc/self/cgroup | head -1"
    )
    result = await run(tmp_path, command, mode="none")
    pid, own = result.output.split()[:2]
    assert own.startswith(PREFIX)  # the run's own cgroup (other runs may come and go meanwhile)
    # The cgroup is removed only once empty: by then the escaped process has exited.
    assert not alive(int(pid))
    assert own not in {c.name for c in tool_cgroups()}
