"""Supervise service processes: start, restart a failed one with backoff, stop all cleanly.

Each child runs in its own session, so a Ctrl-C in the terminal reaches only ``longhaul up``,
which then stops the children in order (SIGTERM, SIGKILL after a grace period) and waits for
every one of them: nothing outlives it. Every start is a new incarnation (``LONGHAUL_INCARNATION``
in the child's environment); when a child dies, ``on_exit`` hears which one, so the caller can
tell the survivors (who release its leases at once) before the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from longhaul.core.config import CONFIG_ERROR_EXIT
from longhaul.domain.ids import new_id

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
STABLE_AFTER_S = 30.0
"""A child that ran this long before failing starts its backoff afresh."""
EXIT_HOOK_S = 2.0
"""Bound on reporting a death (NATS may be what died): the restart must not wait longer."""


@dataclass
class ChildSpec:
    name: str
    module: str
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Child:
    spec: ChildSpec
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0
    started_at: float = 0.0
    incarnation: str = ""


def restart_delay(restarts: int, started_at: float) -> tuple[float, int]:
    """Exponential backoff from 0.5 s (capped), afresh for a child that ran a while: the
    delay before the next start and the new restart count."""
    if time.monotonic() - started_at > STABLE_AFTER_S:
        restarts = 0
    return min(MAX_BACKOFF_S, 0.5 * 2**restarts), restarts + 1


ExitHook = Callable[[ChildSpec, str, int], Awaitable[None]]
"""``(spec, incarnation, exit code)`` of a child that died."""


class Supervisor:
    """Runs each child as ``python -m <module>``, its output appended to
    ``log_dir/<name>.log`` (or inherited when ``log_dir`` is None)."""

    def __init__(
        self,
        specs: list[ChildSpec],
        *,
        base_env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        grace_s: float = 10.0,
        on_change: Callable[[], None] | None = None,
        on_exit: ExitHook | None = None,
    ) -> None:
        self._children = [_Child(spec) for spec in specs]
        self._base_env = dict(base_env or os.environ)
        self._log_dir = log_dir
        self._grace_s = grace_s
        self._on_change = on_change
        self._on_exit = on_exit
        self._stopping = asyncio.Event()
        self.refused = asyncio.Event()
        """Set when a child refused its configuration (``CONFIG_ERROR_EXIT``): not restarted."""
        self.refused_by: str | None = None
        self._watchers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        if self._log_dir is not None:
            self._log_dir.mkdir(parents=True, exist_ok=True)
        for child in self._children:
            await self._spawn(child)
            self._watchers.append(asyncio.create_task(self._watch(child)))

    def log_path(self, name: str) -> Path | None:
        return self._log_dir / f"{name}.log" if self._log_dir is not None else None

    async def _spawn(self, child: _Child) -> None:
        child.incarnation = new_id("inc")
        env = {**self._base_env, **child.spec.env, "LONGHAUL_INCARNATION": child.incarnation}
        path = self.log_path(child.spec.name)
        output = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None
        try:
            child.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                child.spec.module,
                env=env,
                start_new_session=True,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=output,
            )
        finally:
            if output is not None:
                os.close(output)
        child.started_at = time.monotonic()
        log.info("started %s (pid %s)", child.spec.name, child.process.pid)
        if self._on_change is not None:
            self._on_change()

    async def _watch(self, child: _Child) -> None:
        while not self._stopping.is_set():
            assert child.process is not None
            code = await child.process.wait()
            if self._stopping.is_set():
                return
            if code == CONFIG_ERROR_EXIT:  # the same configuration would fail the same way
                log.error("%s refused its configuration; see its log", child.spec.name)
                self.refused_by = self.refused_by or child.spec.name
                self.refused.set()
                return
            delay, child.restarts = restart_delay(child.restarts, child.started_at)
            log.warning("%s exited with %s; restarting in %.1fs", child.spec.name, code, delay)
            if self._on_exit is not None:
                try:
                    await asyncio.wait_for(
                        self._on_exit(child.spec, child.incarnation, code), timeout=EXIT_HOOK_S
                    )
                except Exception:
                    log.exception("could not report the exit of %s", child.spec.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
            if self._stopping.is_set():
                return
            await self._spawn(child)

    def pids(self) -> dict[str, int]:
        return {c.spec.name: c.process.pid for c in self._children if c.process}

    async def stop(self) -> None:
        self._stopping.set()
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        running = [c.process for c in self._children if c.process and c.process.returncode is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        await asyncio.gather(*(self._reap(process) for process in running))

    async def _reap(self, process: asyncio.subprocess.Process) -> None:
        try:
            await asyncio.wait_for(process.wait(), timeout=self._grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
