"""Each confined tool process tree in a cgroup of its own.

``setrlimit`` limits one process at a time (a tool forking ten 4 GB processes uses 40 GB) and
counts processes per user (every tool running at once, all as ``sandbox.uid``, shares one
``max_processes``). A cgroup per tool run limits the whole tree: ``memory_mb`` of memory and
``max_processes`` processes for everything the run starts, and nothing it leaves behind
survives the run (the cgroup's processes are killed when it is removed).

Where the host lets this service manage cgroups:

* **cgroup v2** (one hierarchy): the service's own cgroup must have the ``memory`` and
  ``pids`` controllers delegated and be writable. A v2 cgroup with processes in it cannot give
  its children controllers, so the service first moves itself into a leaf
  (``longhaul-service``), then enables the controllers for its subtree;
* **cgroup v1** (a hybrid host): writable ``memory`` and ``pids`` hierarchies.

Anywhere else (a container without a delegated cgroup, an unprivileged service on v1) tools
run with ``setrlimit`` alone and the start-up log says why (:func:`placement`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
LEAF = "longhaul-service"
PREFIX = "longhaul-tool-"
REMOVE_WITHIN_S = 5.0
LEFTOVER_AFTER_S = 60.0
"""An empty tool cgroup this old was left by a process killed mid-run (a live run's cgroup
holds its processes within milliseconds of being made)."""


@dataclass(frozen=True)
class Placement:
    """Where tool cgroups are made: one v2 directory, or the v1 memory and pids ones."""

    version: int
    parents: tuple[Path, ...]

    def describe(self) -> str:
        return f"cgroup v{self.version} per tool run (memory and processes per tree)"


def _own_paths() -> dict[str, str]:
    """This process's cgroup per controller (``""``: the v2 hierarchy)."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _writable(directory: Path) -> bool:
    """Whether a child cgroup can be made here (a probe: access() does not know cgroupfs)."""
    probe = directory / f"longhaul-probe-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
    except OSError:
        return False
    probe.rmdir()
    return True


def detect(root: Path = ROOT) -> Placement | str:
    """Where tool cgroups can be made, or why not (one line for the start-up log). On v2 this
    moves the service into its leaf: call it once per process (:func:`placement`)."""
    try:
        own = _own_paths()
    except OSError as exc:
        return f"no cgroups ({exc})"
    if (root / "cgroup.controllers").exists() and "" in own:
        parent = root / own[""].lstrip("/")
        delegated = set((parent / "cgroup.controllers").read_text().split())
        if not {"memory", "pids"} <= delegated:
            return f"cgroup v2 without the memory and pids controllers delegated to {parent}"
        if not _writable(parent):
            return f"cgroup v2: {parent} is not writable by this service"
        leaf = parent / LEAF
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
        return Placement(2, (parent,))
    if "memory" in own and "pids" in own:
        memory = root / "memory" / own["memory"].lstrip("/")
        pids = root / "pids" / own["pids"].lstrip("/")
        if _writable(memory) and _writable(pids):
            return Placement(1, (memory, pids))
        return "cgroup v1: the memory and pids hierarchies are not writable by this service"
    return "no cgroup with memory and pids controllers for this service"


@functools.cache
def placement() -> Placement | str:
    """:func:`detect`, once per process; empty cgroups left by killed runs are removed."""
    where = detect()
    if isinstance(where, Placement):
        remove_leftovers(where)
    return where


def remove_leftovers(where: Placement) -> int:
    """Remove the empty tool cgroups older than :data:`LEFTOVER_AFTER_S`; how many."""
    removed = 0
    for parent in where.parents:
        for directory in parent.glob(f"{PREFIX}*"):
            with contextlib.suppress(OSError):  # in use, or removed meanwhile
                if time.time() - directory.stat().st_mtime < LEFTOVER_AFTER_S:
                    continue
                if (directory / "cgroup.procs").read_text().strip():
                    continue
                directory.rmdir()
                removed += 1
    return removed


class ToolCgroup:
    """One tool run's cgroup (a directory per hierarchy)."""

    def __init__(self, directories: list[Path]) -> None:
        self.directories = directories

    @classmethod
    def create(cls, where: Placement, *, memory_mb: int, max_processes: int) -> ToolCgroup:
        """A new cgroup with the limits (blocking: a few sysfs writes)."""
        name = f"{PREFIX}{secrets.token_hex(6)}"
        memory = str(memory_mb * 1024 * 1024)
        if where.version == 2:
            directory = where.parents[0] / name
            directory.mkdir()
            (directory / "memory.max").write_text(memory)
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to cap
                (directory / "memory.swap.max").write_text("0")
            (directory / "pids.max").write_text(str(max_processes))
            return cls([directory])
        memory_dir, pids_dir = (parent / name for parent in where.parents)
        memory_dir.mkdir()
        cgroup = cls([memory_dir])
        (memory_dir / "memory.limit_in_bytes").write_text(memory)
        pids_dir.mkdir()
        cgroup.directories.append(pids_dir)
        (pids_dir / "pids.max").write_text(str(max_processes))
        return cgroup

    def enter(self) -> None:
        """Move the calling process in (a ``preexec_fn``: before the tool's code runs, so
        everything it starts is inside)."""
        pid = str(os.getpid())
        for directory in self.directories:
            (directory / "cgroup.procs").write_text(pid)

    def remove(self) -> None:
        """Kill whatever the run left in the cgroup and remove it (blocking, bounded)."""
        deadline = time.monotonic() + REMOVE_WITHIN_S
        for directory in self.directories:
            while directory.exists():
                self._kill_all(directory)
                try:
                    directory.rmdir()
                except FileNotFoundError:
                    break
                except OSError:  # busy: processes are still exiting
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)

    @staticmethod
    def _kill_all(directory: Path) -> None:
        kill = directory / "cgroup.kill"
        if kill.exists():
            kill.write_text("1")
            return
        with contextlib.suppress(FileNotFoundError):
            for pid in (directory / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
