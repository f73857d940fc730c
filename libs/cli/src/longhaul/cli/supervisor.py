"""Supervise service processes: start, restart a failed one with backoff, stop all cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
STABLE_AFTER_S = 30.0


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


class Supervisor:
    """Runs each child as ``python -m <module>``; ``stop()`` ends them with SIGTERM (then
    SIGKILL after ``grace_s``)."""

    def __init__(self, specs: list[ChildSpec], *, base_env: Mapping[str, str] | None = None,
                 grace_s: float = 10.0) -> None:
        self._children = [_Child(spec) for spec in specs]
        self._base_env = dict(base_env or os.environ)
        self._grace_s = grace_s
        self._stopping = asyncio.Event()
        self._watchers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        for child in self._children:
            await self._spawn(child)
            self._watchers.append(asyncio.create_task(self._watch(child)))

    async def _spawn(self, child: _Child) -> None:
        env = {**self._base_env, **child.spec.env}
        child.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", child.spec.module, env=env, start_new_session=True
        )
        child.started_at = time.monotonic()
        log.info("started %s (pid %s)", child.spec.name, child.process.pid)

    async def _watch(self, child: _Child) -> None:
        while not self._stopping.is_set():
            assert child.process is not None
            code = await child.process.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - child.started_at > STABLE_AFTER_S:
                child.restarts = 0
            delay = min(MAX_BACKOFF_S, 0.5 * 2**child.restarts)
            child.restarts += 1
            log.warning("%s exited with %s; restarting in %.1fs", child.spec.name, code, delay)
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
        for process in running:
            try:
                await asyncio.wait_for(process.wait(), timeout=self._grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
