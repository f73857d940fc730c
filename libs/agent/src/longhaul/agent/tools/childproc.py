"""What a tool's child process inherits: an allow-listed environment and death with its parent.

A service's environment holds API keys, the provider key and NATS credentials; a tool's
output is stored on the trace, so nothing but the variables below may reach a child. And a
command must not outlive the executor that started it: its call would be recorded
``interrupted`` while it kept running.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

ALLOWED_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM")
_PR_SET_PDEATHSIG = 1


def child_env(working_dir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed variables of this process, ``HOME`` set to the working directory,
    then ``extra`` (the operator's, e.g. a verification command's ``env``)."""
    env = {name: os.environ[name] for name in ALLOWED_ENV if name in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["HOME"] = str(working_dir)
    env.update(extra or {})
    return env


_forked_by = 0
"""In a child: the pid of the process that forked it (set in the parent before each fork)."""


def _note_forker() -> None:
    global _forked_by
    _forked_by = os.getpid()


os.register_at_fork(before=_note_forker)


def terminate_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGTERM to this child when the process that started it
    dies (even by SIGKILL). The shell wrapper turns that SIGTERM into a kill of its group."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    # the parent died before prctl took effect: this child was handed to a reaper. Not "the
    # parent is pid 1": a service in a container is pid 1 itself.
    if _forked_by and os.getppid() != _forked_by:
        os._exit(137)


def limit_child(limits: Sequence[tuple[int, int, int]]) -> None:
    """``preexec_fn``: die with the parent, then apply ``(resource, soft, hard)`` limits (never
    above a hard limit this process already has)."""
    terminate_with_parent()
    for which, soft, hard in limits:
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            hard = min(hard, current_hard)
            soft = min(soft, hard)
        resource.setrlimit(which, (soft, hard))


# bash runs the command in a child of its own and waits for it, so that the parent-death
# SIGTERM interrupts the wait and kills the whole process group (the command and whatever it
# started), not only this shell.
GROUP_GUARD = 'trap "kill -KILL 0" TERM; bash -c "$1" & wait $!'
