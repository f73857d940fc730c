"""Host-side views of processes a sandboxed command started (it only knows its pids inside
its own PID namespace)."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path


def marker(label: str = "sleep") -> list[str]:
    """A ``sleep`` command line no other process on the machine runs."""
    return [label, f"{uuid.uuid4().int % 10**6 + 1000}.5"]


def killed(pid: int) -> bool:
    """Dead, a zombie, or with SIGKILL already pending: no timing involved."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    sigkill = 1 << (signal.SIGKILL - 1)
    pending = int(fields["SigPnd"], 16) | int(fields["ShdPnd"], 16)
    return fields["State"].split()[0] in ("Z", "X") or bool(pending & sigkill)


def host_pids(argv: list[str]) -> list[int]:
    """Host pids of the live processes running exactly ``argv``."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
    return [pid for pid in found if not killed(pid)]


async def wait_for_host_pids(argv: list[str], count: int, deadline_s: float = 20) -> list[int]:
    deadline = time.monotonic() + deadline_s
    while len(pids := host_pids(argv)) < count:
        assert time.monotonic() < deadline, f"{argv} never started {count} times"
        await asyncio.sleep(0.02)
    return pids
