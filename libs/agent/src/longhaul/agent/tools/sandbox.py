"""Confinement of tool processes (``bash``, the verifier's command check) with bubblewrap.

A sandboxed process sees the system's programs read-only (``/usr`` and the few ``/etc``
files a dynamic linker and, with network, a resolver need), its working directory
read-write, a private ``/tmp``, ``/dev`` and ``/proc``, and nothing else: no other trace's
or key's directory, no data dir, no configuration, no service home. It runs in fresh
namespaces (PID, IPC, UTS, mount, network unless allowed) with no capabilities, a cleared
environment plus the caller's allow-list, and resource limits (CPU time, address space,
processes, file size, no core dumps). It dies with the process that started it, and killing
the ``bwrap`` process (the group leader) takes the whole PID namespace with it.

``mode: auto`` uses bubblewrap when it works on this machine and otherwise refuses (the
caller reports a tool error); ``mode: none`` is the operator's explicit opt-out.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from longhaul.agent.tools.childproc import limit_child
from longhaul.domain.config import SandboxConfig

# What programs need from /etc: the dynamic linker's cache, `alternatives` (Debian's
# /usr/bin/awk etc. point there) and the time zone. With network: name resolution and CAs.
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone")
_ETC_NETWORK = (
    "resolv.conf",
    "hosts",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
)
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


# The kernel's knobs stay read-only even for a process that could write them.
_PROC_READ_ONLY = (
    *("--ro-bind", "/proc/sys", "/proc/sys"),
    *("--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"),
)


class SandboxUnavailable(RuntimeError):
    """No confinement mechanism works here and the operator did not opt out."""


def _drop(config: SandboxConfig) -> list[str]:
    """Under a root service, tool processes start as ``config.uid``: bubblewrap's namespace
    would map its root to host root otherwise (able to write what is bound in, exempt from
    ``RLIMIT_NPROC``)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv") or "setpriv"
    return [setpriv, f"--reuid={config.uid}", f"--regid={config.gid}", "--clear-groups", "--"]


def _searchable(path: Path, uid: int, gid: int) -> bool:
    info = path.stat()
    if info.st_uid == uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def hand_over(directory: Path, uid: int, gid: int) -> None:
    """Give ``directory`` and what root made in it to the sandbox's identity, so that tool
    processes can write where the file tools and uploads (running as root) wrote; entries
    owned by anyone else are left alone, and links are never followed. A walk per command:
    cheap next to starting a sandbox, and nothing root wrote since the last one is missed."""
    for path in (directory, *directory.rglob("*")):
        with contextlib.suppress(FileNotFoundError):
            if path.lstat().st_uid == 0:
                os.chown(path, uid, gid, follow_symlinks=False)


def _unprivileged(config: SandboxConfig, places: Sequence[Path]) -> list[str]:
    """The command prefix that drops root (empty when not root), after making ``places``
    the sandbox identity's and checking that it can reach them."""
    prefix = _drop(config)
    if not prefix:
        return []
    for place in places:
        resolved = Path(place).resolve()
        blocked = [p for p in resolved.parents if not _searchable(p, config.uid, config.gid)]
        if blocked:
            raise SandboxUnavailable(
                f"refused: the sandbox runs tool processes as uid {config.uid} (the service is "
                f"root), which cannot reach {resolved}: {blocked[0]} is not searchable by it "
                "(chmod o+x it, or set sandbox.uid)"
            )
        hand_over(resolved, config.uid, config.gid)
    return prefix


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str | None, drop: tuple[str, ...] = ()) -> str | None:
    """``None`` if ``bwrap`` can build a sandbox here (as the identity ``drop`` switches to),
    else the reason it cannot."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed or not on PATH"
    try:
        done = subprocess.run(
            [
                *drop,
                bwrap,
                *_system_binds(),
                *("--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"),
                *("--unshare-all", "--unshare-user", "--disable-userns"),
                *("--cap-drop", "ALL", "--", "true"),
            ],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not be started: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        return f"{bwrap} cannot create namespaces here: {detail}"
    return None


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _TOP_LEVEL:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


class Sandbox:
    """Builds the command line and the ``preexec_fn`` of a confined child process."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        self.bwrap: str | None = None
        self.problem: str | None = None
        if self.config.mode != "none":
            self.bwrap = shutil.which("bwrap")
            self.problem = _probe(self.bwrap, tuple(_drop(self.config)))

    @property
    def confined(self) -> bool:
        return self.config.mode != "none" and self.problem is None

    def describe(self) -> str:
        """One line for the start-up log."""
        c = self.config
        limits = f"cpu {c.cpu_s} s, memory {c.memory_mb} MB, {c.max_processes} processes"
        if c.mode == "none":
            return f"sandbox off (sandbox.mode: none): tool processes run unconfined; {limits}"
        if self.problem:
            return (
                f"no sandbox: {self.problem}; bash and command checks are refused "
                "(install bubblewrap, or set sandbox.mode: none to run them unconfined)"
            )
        network = "on" if c.network else "off"
        who = f", as uid {c.uid} (the service is root)" if os.geteuid() == 0 else ""
        return (
            f"sandbox: bubblewrap ({self.bwrap}){who}, network {network}, {limits}, "
            f"/tmp {c.tmp_mb} MB, no nested namespaces"
        )

    def command(
        self,
        argv: Sequence[str],
        *,
        working_dir: Path,
        env: Mapping[str, str],
        cwd: Path | None = None,
        writable: Sequence[Path] = (),
    ) -> list[str]:
        """``argv`` wrapped in bubblewrap (``working_dir`` and ``writable`` read-write, run in
        ``cwd`` or ``working_dir``); unchanged with ``mode: none``. The environment is
        ``env`` and nothing else either way (pass it to the process too)."""
        if self.config.mode == "none":
            return list(argv)
        if self.problem is not None:
            raise SandboxUnavailable(
                f"refused: no sandbox for tool processes ({self.problem}); the operator can "
                "install bubblewrap or set sandbox.mode: none"
            )
        assert self.bwrap is not None
        c = self.config
        prefix = _unprivileged(c, (working_dir, *writable))
        args = [*prefix, self.bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
        args += ["--unshare-user", "--disable-userns"]  # no nested namespaces inside
        if c.network:
            args.append("--share-net")
        args += ["--cap-drop", "ALL", "--hostname", "sandbox", *_system_binds()]
        etc = _ETC + (_ETC_NETWORK if c.network else ())
        for name in etc:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for path in c.read_only:
            args += ["--ro-bind-try", path, path]
        tmp = str(c.tmp_mb * 1024 * 1024)
        args += ["--dev", "/dev", "--proc", "/proc", *_PROC_READ_ONLY]
        args += ["--size", tmp, "--tmpfs", "/tmp", "--size", tmp, "--tmpfs", "/var/tmp"]
        for place in (working_dir, *writable):
            resolved = str(Path(place).resolve())
            args += ["--bind", resolved, resolved]
        args += ["--chdir", str((cwd or working_dir).resolve()), "--clearenv"]
        for name, value in env.items():
            args += ["--setenv", name, value]
        return [*args, "--", *argv]

    def preexec(self) -> None:
        """``preexec_fn`` of the child: dies with its parent, then the resource limits."""
        limit_child(rlimits(self.config))


def rlimits(c: SandboxConfig) -> list[tuple[int, int, int]]:
    """``(resource, soft, hard)`` for every limit ``c`` sets on a tool process."""
    mb = 1024 * 1024
    return [
        (resource.RLIMIT_CPU, c.cpu_s, c.cpu_s + 5),
        (resource.RLIMIT_AS, c.memory_mb * mb, c.memory_mb * mb),
        (resource.RLIMIT_NPROC, c.max_processes, c.max_processes),
        (resource.RLIMIT_FSIZE, c.file_mb * mb, c.file_mb * mb),
        (resource.RLIMIT_CORE, 0, 0),
    ]
