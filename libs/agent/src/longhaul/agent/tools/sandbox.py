"""Confinement of tool processes (``bash``, the verifier's command check) with bubblewrap.

A sandboxed process sees the system's programs read-only (``/usr`` and the few ``/etc``
files a dynamic linker and, with network, a resolver need), its working directory
read-write, a private ``/tmp``, ``/dev`` and ``/proc``, and nothing else: no other trace's
or key's directory, no data dir, no configuration, no service home. It runs in fresh
namespaces (PID, IPC, UTS, mount, network unless allowed) with no capabilities, a cleared
environment plus the caller's allow-list, and resource limits (CPU time, address space,
processes, file size, no core dumps). ``/proc/sys`` is read-only, ``/tmp`` is a tmpfs of
``tmp_mb``, and the process can create no user namespace of its own (``--disable-userns``:
a nested one would give it every capability again, over a kernel surface meant for root). It
dies with the process that started it, and killing the ``bwrap`` process (the group leader)
takes the whole PID namespace with it.

A service running as root would make the tool host root (a user namespace maps it back to
uid 0: ``/proc/sys`` writable, no process limit). So as root, an outer ``bwrap`` builds the
mounts and namespaces (it can reach any path), ``setpriv`` drops to ``sandbox.uid`` and an
inner unprivileged ``bwrap`` adds the user namespace; the working directory is handed to
that uid first (:meth:`Sandbox.prepare`). Root keeps full access to what the tool wrote.

``mode: auto`` uses bubblewrap when it works on this machine and otherwise refuses (the
caller reports a tool error); ``mode: none`` is the operator's explicit opt-out.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import resource
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from longhaul.agent.tools.cgroups import Placement, ToolCgroup, placement
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
# (bwrap builds its new root under /tmp: an inner one needs it to exist.)
_PROBE_MOUNTS = ("--dev", "/dev", "--tmpfs", "/tmp")
_PROC = ("--proc", "/proc")
_NO_PROC = ("--perms", "0555", "--dir", "/proc")
MASKED_PROC = "Can't mount proc"
"""bwrap's words when the kernel refuses a fresh /proc: a container runtime masks parts of the
container's own (Docker's default; Compose cannot lift it), and an unprivileged user namespace
may mount proc only where one is fully visible."""
NO_PROC_NOTE = (
    "ok, without /proc and so without the block on nested user namespaces: the container "
    "runtime masks parts of its own (docker run --security-opt systempaths=unconfined, or "
    "Kubernetes procMount: Unmasked, gives tools both)"
)


class SandboxUnavailable(RuntimeError):
    """No confinement mechanism works here and the operator did not opt out."""


class WorkdirFull(RuntimeError):
    """The working directory uses more disk than ``sandbox.workdir_mb``."""


@functools.lru_cache(maxsize=8)
def _probe(bwrap: str | None, uid: int | None) -> tuple[str | None, bool]:
    """``(None, with_proc)`` if ``bwrap`` can build a sandbox here (as ``uid``, when given),
    with a fresh ``/proc`` or, where the runtime's masks forbid one, without any; else
    ``(the reason it cannot, False)``."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed or not on PATH", False
    if uid is not None and shutil.which("setpriv") is None:
        return (
            "setpriv (util-linux) is not installed: needed to run tools as a non-root user",
            False,
        )
    problem = _try(bwrap, uid, _PROC)
    if problem is None:
        return None, True
    if MASKED_PROC in problem and _try(bwrap, uid, _NO_PROC) is None:
        return None, False
    return problem, False


def _try(bwrap: str, uid: int | None, proc: Sequence[str]) -> str | None:
    mounts = [*_system_binds(), *_PROBE_MOUNTS, *proc]
    try:
        done = subprocess.run(
            [*_layers(bwrap, uid, mounts, "/", proc=proc == _PROC), "--", "true"],
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


def _layers(
    bwrap: str, uid: int | None, mounts: list[str], cwd: str, *, proc: bool = True
) -> list[str]:
    """The ``bwrap`` command line(s) up to the ``--`` before the program: ``mounts`` and the
    namespaces (not network: the caller adds ``--unshare-net``), then, as ``uid`` when given,
    the user namespace with no nested one and a read-only ``/proc/sys``. Without a fresh
    ``/proc`` there is neither: bwrap forbids nested namespaces by writing the new
    namespace's own ``/proc/sys/user/max_user_namespaces``."""
    userns = ["--unshare-user"]
    if proc:
        userns += ["--disable-userns", "--ro-bind", "/proc/sys", "/proc/sys"]
        userns += ["--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"]
    inner = [*userns, "--chdir", cwd, "--cap-drop", "ALL"]
    spaces = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
    if uid is None:
        return [bwrap, *spaces, *mounts, *inner]
    # bwrap as root writes the uid map 0 -> 0: the drop happens between two bwraps.
    # bwrap as root maps uid 0 to 0: the drop happens between two bwraps. setpriv keeps only
    # what it needs to change user; after the change no capability is left.
    caps = ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    outer = [bwrap, *spaces, *caps, *mounts, "--"]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    # The inner bwrap keeps everything the outer one mounted, devices included.
    ids = ["--uid", str(uid), "--gid", str(uid), "--dev-bind", "/", "/"]
    return [*outer, *drop, bwrap, *ids, *inner]


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
        self.proc = True
        """Tools get a fresh ``/proc`` (else none: see :data:`MASKED_PROC`)."""
        if self.config.mode != "none":
            self.bwrap = shutil.which("bwrap")
            self.problem, self.proc = _probe(self.bwrap, self.uid)

    @property
    def uid(self) -> int | None:
        """The user tool processes run as: ``sandbox.uid`` when this service is root."""
        return self.config.uid if os.geteuid() == 0 else None

    @property
    def confined(self) -> bool:
        return self.config.mode != "none" and self.problem is None

    @property
    def refuses(self) -> bool:
        """Every tool process is refused: no sandbox, and the operator did not opt out."""
        return self.config.mode != "none" and self.problem is not None

    def state(self) -> str:
        """``ok`` when tools run confined, else why not (an executor's presence, ``/readyz``)."""
        if self.config.mode == "none":
            return "off: sandbox.mode none, tools run unconfined"
        if self.problem is not None:
            return f"unavailable: {self.problem}"
        return "ok" if self.proc else NO_PROC_NOTE

    def describe(self) -> str:
        """One line for the start-up log (at :meth:`log_level`)."""
        c = self.config
        limits = f"cpu {c.cpu_s} s, memory {c.memory_mb} MB, {c.max_processes} processes"
        if c.mode == "none":
            return f"sandbox off (sandbox.mode: none): tool processes run unconfined; {limits}"
        if self.problem:
            return (
                f"degraded, no sandbox: {self.problem}; bash, command checks and per-key MCP "
                "servers are refused "
                "(install bubblewrap, or set sandbox.mode: none to run them unconfined)"
            )
        network = "on" if c.network else "off"
        user = "" if self.uid is None else f", as uid {self.uid}"
        where = self.cgroups()
        trees = where.describe() if isinstance(where, Placement) else f"no cgroups: {where}"
        proc = "" if self.proc else ", no /proc nor nested-namespace block (runtime masks /proc)"
        return (
            f"sandbox: bubblewrap ({self.bwrap}){user}, network {network}{proc}, {limits}; {trees}"
        )

    def log_level(self) -> int:
        """A warning when every tool process is refused (the service is degraded)."""
        return logging.WARNING if self.refuses else logging.INFO

    def cgroups(self) -> Placement | str:
        """Where each run's cgroup is made, or why there is none (blocking the first time)."""
        if not self.config.cgroups:
            return "off (sandbox.cgroups: false)"
        return placement()

    @contextlib.asynccontextmanager
    async def tool_cgroup(self) -> AsyncIterator[ToolCgroup | None]:
        """A cgroup for one run (``None`` where there is none); on the way out, whatever the
        run left in it is killed and it is removed."""
        where = await asyncio.to_thread(self.cgroups)
        if not isinstance(where, Placement):
            yield None
            return
        c = self.config
        cgroup = await asyncio.to_thread(
            ToolCgroup.create, where, memory_mb=c.memory_mb, max_processes=c.max_processes
        )
        try:
            yield cgroup
        finally:
            await asyncio.to_thread(cgroup.remove)

    def prepare(self, places: Sequence[Path]) -> None:
        """Before a run: refuse it (:class:`WorkdirFull`) when the first of ``places`` (the
        working directory) uses more than ``workdir_mb``; as root, hand ``places``
        (recursively) to the sandbox's user so that its tools can write there. One walk per
        place. Blocking: call it off the event loop."""
        uid = self.uid if self.confined else None
        for index, place in enumerate(places):
            used = _walk(Path(place), uid)
            if index == 0 and used > self.config.workdir_mb * 1024 * 1024:
                raise WorkdirFull(
                    f"refused: the working directory uses {used / 1048576:.0f} MB, over "
                    f"sandbox.workdir_mb ({self.config.workdir_mb} MB); delete files first"
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
        mounts = ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if not c.network:
            mounts.append("--unshare-net")
        mounts += _system_binds()
        mounts += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/var"]
        etc = _ETC + (_ETC_NETWORK if c.network else ())
        for name in etc:
            mounts += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        tmp = str(c.tmp_mb * 1024 * 1024)
        mounts += ["--dev", "/dev", *(_PROC if self.proc else _NO_PROC)]
        for scratch in ("/tmp", "/var/tmp"):  # writable by the tool's user, like the host's
            mounts += ["--perms", "1777", "--size", tmp, "--tmpfs", scratch]
        # after the private /tmp: a path under the host's /tmp stays visible above it
        for path in _outermost(c.read_only):
            mounts += [*_parents(Path(path)), "--ro-bind-try", path, path]
        for place in (working_dir, *writable):
            resolved = Path(place).resolve()
            mounts += [*_parents(resolved), "--bind", str(resolved), str(resolved)]
        mounts.append("--clearenv")
        for name, value in env.items():
            mounts += ["--setenv", name, value]
        where = str((cwd or working_dir).resolve())
        return [*_layers(self.bwrap, self.uid, mounts, where, proc=self.proc), "--", *argv]

    def preexec(self) -> None:
        """``preexec_fn`` of the child: dies with its parent, then the resource limits."""
        limit_child(rlimits(self.config))

    def preexec_in(self, cgroup: ToolCgroup | None) -> Callable[[], None]:
        """:meth:`preexec`, and into ``cgroup`` before the tool's code runs."""
        if cgroup is None:
            return self.preexec

        def preexec() -> None:
            cgroup.enter()
            self.preexec()

        return preexec


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


def program_paths(argv: Sequence[str], search_path: str | None) -> list[str]:
    """What running ``argv`` reads outside the system's directories, to bind read-only: the
    program (found on ``search_path``), the virtualenv it belongs to and the installation
    its interpreter comes from, and the arguments that name existing files (its script)."""
    found = shutil.which(argv[0], path=search_path) if argv else None
    wanted: list[Path] = []
    if found is not None:
        program = Path(os.path.abspath(found))
        real = program.resolve()
        wanted += [program, real]
        for bin_dir in (program.parent, real.parent):
            venv = bin_dir.parent / "pyvenv.cfg"
            if bin_dir.name in ("bin", "Scripts") and venv.is_file():
                wanted.append(venv.parent)
                home = _venv_home(venv)
                if home is not None:
                    wanted.append(home.parent)  # the base interpreter's prefix
            elif bin_dir.name == "bin" and any(bin_dir.parent.glob("lib/python3*/os.py")):
                wanted.append(bin_dir.parent)  # a Python installation: bin/ beside its lib/
    wanted += [Path(os.path.abspath(arg)) for arg in argv[1:] if os.path.isfile(arg)]
    system = [Path("/usr"), *(Path("/") / name for name in _TOP_LEVEL)]
    paths: list[str] = []
    for path in wanted:
        if path != Path("/") and not any(path.is_relative_to(top) for top in system):
            if str(path) not in paths:
                paths.append(str(path))
    return paths


def _outermost(paths: Sequence[str]) -> list[str]:
    """``paths`` without those inside another one: binding a path below a read-only bind
    (a virtualenv's ``bin/python`` link below the virtualenv) would fail."""
    tops = [Path(os.path.abspath(path)) for path in paths]
    kept: list[str] = []
    for index, path in enumerate(tops):
        inside = any(
            path.is_relative_to(other) and (path != other or other_index < index)
            for other_index, other in enumerate(tops)
            if other_index != index
        )
        if not inside:
            kept.append(str(path))
    return kept


def _venv_home(cfg: Path) -> Path | None:
    for line in cfg.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return Path(value.strip())
    return None


def _parents(path: Path) -> list[str]:
    """bwrap creates a mount point's missing parents 0700, which a non-root tool could not
    pass: create them passable (not listable) first; existing ones stay as they are."""
    args: list[str] = []
    for parent in reversed(path.parents[:-1]):
        args += ["--perms", "0711", "--dir", str(parent)]
    return args


def _walk(top: Path, uid: int | None) -> int:
    """Bytes of disk ``top`` and everything below it use; with ``uid``, each entry is also
    handed to that user. Relative to directory descriptors, links never followed: a tool
    running meanwhile in the same directory cannot swap a directory for a link to elsewhere
    and have root chown what it points at."""
    if not top.exists():
        return 0
    used = 0
    for _root, dirs, files, fd in os.fwalk(top):
        for name in (".", *dirs, *files):
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile
                stat = os.stat(name, dir_fd=fd, follow_symlinks=False)
                used += stat.st_blocks * 512
                if uid is not None and stat.st_uid != uid:
                    os.chown(name, uid, uid, dir_fd=fd, follow_symlinks=False)
    return used


def main() -> int:
    """``python -m longhaul.agent.tools.sandbox``: the health check of a service that runs
    tool processes. Prints this configuration's sandbox state; exit 1 when they would all be
    refused (``degraded``), 0 when they run confined or the operator opted out."""
    from longhaul.domain.config import SandboxConfig, load_section

    sandbox = Sandbox(load_section("sandbox", SandboxConfig))
    print(("degraded: " if sandbox.refuses else "") + sandbox.state())
    return 1 if sandbox.refuses else 0


if __name__ == "__main__":
    raise SystemExit(main())
