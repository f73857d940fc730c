"""``longhaul eval --chaos executor[:N]``: kill a random executor of the local ``longhaul up``
with SIGKILL N times while the suite runs.

The stack is found through ``<data-dir>/up.json`` (which ``up`` rewrites whenever a child
starts), and must be the one the command talks to. Each kill waits until runs are in flight
(those are marked ``recovered`` if they still finish) and, after it, until the supervisor has
started the executor again and a run has finished since, so the kills spread over the suite
instead of landing on one moment. On a deterministic model the results must equal a run
without faults: that is what the table's ``recovered`` column vouches for.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longhaul.cli.context import console

DEFAULT_KILLS = 2
RESTART_WAIT_S = 60.0
POLL_S = 0.05


class ChaosError(Exception):
    """``--chaos`` cannot run here (exit 2)."""


def parse_chaos(spec: str) -> int:
    """``executor`` (2 kills) or ``executor:N``."""
    target, _, count = spec.partition(":")
    if target != "executor":
        raise ChaosError(f"--chaos {spec!r}: only executor[:N] is supported")
    try:
        kills = int(count) if count else DEFAULT_KILLS
    except ValueError:
        raise ChaosError(f"--chaos {spec!r}: N must be a whole number") from None
    if not 1 <= kills <= 100:
        raise ChaosError(f"--chaos {spec!r}: N must be 1 to 100")
    return kills


def _state(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise ChaosError(f"{path}: no running `longhaul up` found ({exc})") from None


def local_stack(data_dir: Path, url: str) -> Path:
    """``up.json`` of the ``longhaul up`` serving ``url``, or :class:`ChaosError`."""
    path = data_dir / "up.json"
    state = _state(path)
    if str(state.get("gateway", "")).rstrip("/") != url.rstrip("/"):
        raise ChaosError(
            f"--chaos needs the local `longhaul up` the command talks to: {path} serves "
            f"{state.get('gateway')}, not {url} (pass its --data-dir)"
        )
    if not _executors(state):
        raise ChaosError(f"{path}: the stack has no executor")
    return path


def _executors(state: dict[str, Any]) -> dict[str, int]:
    children = state.get("children") or {}
    return {name: int(pid) for name, pid in children.items() if name.startswith("executor")}


@dataclass
class Faults:
    """The runs of an eval in flight, and those in flight when a fault was injected: they are
    ``recovered`` if they still finish."""

    hit: set[str] = field(default_factory=set)
    in_flight: set[str] = field(default_factory=set)
    finished: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def started(self, trace_id: str) -> None:
        async with self.changed:
            self.in_flight.add(trace_id)
            self.changed.notify_all()

    async def ended(self, trace_id: str) -> None:
        async with self.changed:
            self.in_flight.discard(trace_id)
            self.finished += 1
            self.changed.notify_all()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with self.changed:
            await self.changed.wait_for(predicate)

    def strike(self) -> None:
        self.hit |= self.in_flight


class Chaos:
    """Kills executors while :class:`Faults` shows runs in flight."""

    def __init__(self, state_file: Path, kills: int, seed: int | None = None) -> None:
        self.state_file = state_file
        self.kills = kills
        self.random = random.Random(seed)
        self.done = 0

    async def run(self, faults: Faults) -> None:
        for n in range(1, self.kills + 1):
            await faults.wait_for(lambda: bool(faults.in_flight))
            executors = _executors(await asyncio.to_thread(_state, self.state_file))
            name = self.random.choice(sorted(executors))
            pid = executors[name]
            faults.strike()
            os.kill(pid, signal.SIGKILL)
            self.done = n
            console.print(f"chaos: SIGKILL {name} (pid {pid}), {n} of {self.kills}")
            await self._restarted(name, pid)
            if n < self.kills:
                finished = faults.finished
                await faults.wait_for(lambda: faults.finished > finished)  # noqa: B023

    def report(self) -> None:
        """Say so when the suite ended before every kill landed."""
        if self.done < self.kills:
            console.print(f"[yellow]chaos: the suite ended after {self.done} of {self.kills} kills")

    async def _restarted(self, name: str, pid: int) -> None:
        deadline = time.monotonic() + RESTART_WAIT_S
        while time.monotonic() < deadline:
            state = await asyncio.to_thread(_state, self.state_file)
            if _executors(state).get(name, pid) != pid:
                return
            await asyncio.sleep(POLL_S)
        console.print(f"[yellow]chaos: {name} was not restarted within {RESTART_WAIT_S:g}s")
