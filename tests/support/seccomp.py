"""Apply a seccomp profile in Docker's format to this process, through libseccomp (ctypes on
the system's ``libseccomp.so.2``), the way a container runtime would before starting a service.

Only what a profile without argument filters needs: the default action and per-name actions
(``SCMP_ACT_ALLOW``, ``SCMP_ACT_ERRNO`` with ``errnoRet``, ``SCMP_ACT_KILL``, ``SCMP_ACT_LOG``);
a rule with ``args`` is refused rather than applied loosely. Names this kernel's libseccomp does
not know are skipped, as Docker does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
from pathlib import Path
from typing import Any

_ACTIONS = {"SCMP_ACT_ALLOW": 0x7FFF0000, "SCMP_ACT_KILL": 0x00000000, "SCMP_ACT_LOG": 0x7FFC0000}
_ERRNO = 0x00050000


def libseccomp() -> ctypes.CDLL | None:
    """The system's libseccomp, or None where it is not installed."""
    name = ctypes.util.find_library("seccomp")
    return ctypes.CDLL(name, use_errno=True) if name else None


def _action(rule: dict[str, Any]) -> int:
    if rule["action"] == "SCMP_ACT_ERRNO":
        return _ERRNO | (int(rule.get("errnoRet", errno.EPERM)) & 0xFFFF)
    return _ACTIONS[rule["action"]]


def apply_profile(path: Path) -> None:
    """Load ``path`` as this process's seccomp filter (inherited by every child; for good)."""
    lib = libseccomp()
    assert lib is not None, "libseccomp.so.2 is not installed"
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    profile = json.loads(path.read_text())
    default = _action({"action": profile["defaultAction"]})
    ctx = lib.seccomp_init(default)
    assert ctx, "seccomp_init failed"
    for rule in profile["syscalls"]:
        if rule.get("args"):
            raise ValueError(f"argument filters are not supported here: {rule['names']}")
        action = _action(rule)
        if action == default:
            continue  # libseccomp refuses a rule that repeats the default
        for name in rule["names"]:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue
            if lib.seccomp_rule_add(ctx, action, number, 0) != 0:
                raise OSError(f"seccomp_rule_add({name}) failed")
    if lib.seccomp_load(ctx) != 0:
        raise OSError("seccomp_load failed")
