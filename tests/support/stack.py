"""Executors for tests and benchmarks: real subprocesses or in-process replicas, against a NATS
URL and a namespace, plus helpers to create traces and wait for them.

    async with ExecutorProcess(nats_url, namespace, "exec-a") as proc:   # python -m ...main
        ...
        proc.kill()                                                       # SIGKILL, a crash

    async with InProcessExecutor(nats_url, namespace, "exec-b") as ex:   # same event loop
        ex.executor.metrics ...

    trace_id = await create_trace(store, "do it", model="scripted:/tmp/s.yaml")
    state = await wait_for_trace(store, trace_id, final)                 # deadline, no polling

Readiness is observed, not guessed: an executor announces itself with an ``executor.<id>`` key
in ``lh_leases`` once its durable consumer is bound, and :func:`wait_until_ready` watches for
that key. Subprocess settings travel as environment variables (``LONGHAUL_NATS__URL``,
``LONGHAUL_NATS__NAMESPACE``, ``LONGHAUL_EXECUTOR_ID``, ``LONGHAUL_STORE__LEASE_TTL_S``,
``LONGHAUL_EXECUTOR__*`` …); pass more in ``env``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

import msgspec
from longhaul.agent.tools import ToolRegistry
from longhaul.core.config import LonghaulConfig, NatsConfig, StoreConfig
from longhaul.core.connection import Connection
from longhaul.core.service import ServiceContext, open_context
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.events import Aggregate
from longhaul.domain.ids import new_id
from longhaul.domain.state import TraceState
from longhaul.domain.state.fold import Fold, apply_or_skip
from longhaul.executor.leases import Leases
from longhaul.executor.settings import ExecutorSettings
from longhaul.llm.types import Model

from tests.support.env import service_env as base_service_env
from tests.support.folds import trace_state

T = TypeVar("T")

READY_TIMEOUT_S = 30.0
FAST_LEASE_TTL_S = 2
"""Tests use short leases so a killed executor's traces are taken over within seconds."""
STOP_GRACE_S = 40.0
"""How long a SIGTERMed service may take before it is killed: a bound past what a clean stop
may legitimately take (``serve`` waits 10 s for its main task, then 10 s for the background
tasks and 5 s for the NATS drain), so a slow but clean exit is never turned into a kill."""


def presence_key(executor_id: str) -> str:
    return Leases.presence_key(executor_id)


async def wait_until_ready(conn: Connection, executor_id: str, *, within: float) -> None:
    """Return once ``executor_id`` has announced itself in ``lh_leases``."""
    kv = await conn.kv(conn.names.leases)
    watcher = await kv.watch(presence_key(executor_id))
    try:
        async with asyncio.timeout(within):
            while True:
                entry = await watcher.updates(timeout=within)
                if entry is not None and entry.value:
                    return
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()


async def wait_lease_released(conn: Connection, trace_id: str, *, within: float = 10.0) -> None:
    """Return once no executor holds ``trace_id``'s lease (watching the key, no polling)."""
    kv = await conn.kv(conn.names.leases)
    watcher = await kv.watch(Leases.trace_key(trace_id))
    try:
        async with asyncio.timeout(within):
            while True:
                entry = await watcher.updates(timeout=within)
                if entry is None or entry.operation in ("DEL", "PURGE") or not entry.value:
                    # None: the initial values are delivered and the key has none
                    current = await _lease_value(kv, trace_id)
                    if current is None:
                        return
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()


async def _lease_value(kv: Any, trace_id: str) -> bytes | None:
    from nats.js.errors import KeyNotFoundError

    try:
        entry = await kv.get(Leases.trace_key(trace_id))
    except KeyNotFoundError:
        return None
    return entry.value or None


def scratch_working_root(namespace: str) -> Path:
    """Where a test's executors work unless it says: never the current directory, which as
    root bash's sandbox would hand to its user (an ownerless trace works in the root itself),
    the checkout included. One per namespace, so the replicas of a test share it."""
    return Path(tempfile.gettempdir()) / "lh-work" / namespace


def executor_env(
    nats_url: str,
    namespace: str,
    executor_id: str,
    *,
    lease_ttl_s: float = FAST_LEASE_TTL_S,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of an executor subprocess (inherits ours, minus stray LONGHAUL_*)."""
    env = base_service_env()
    env.update(
        {
            "LONGHAUL_NATS__URL": nats_url,
            "LONGHAUL_NATS__NAMESPACE": namespace,
            "LONGHAUL_EXECUTOR_ID": executor_id,
            "LONGHAUL_STORE__LEASE_TTL_S": str(lease_ttl_s),
            "LONGHAUL_EXECUTOR__SWEEP_INTERVAL_S": str(lease_ttl_s),
            "LONGHAUL_EXECUTOR__ACK_WAIT_S": str(max(3 * lease_ttl_s, 3)),
            "LONGHAUL_LOG_LEVEL": "INFO",
            "LONGHAUL_WORKING_ROOT": str(scratch_working_root(namespace)),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


class StartStop:
    """``async with x:`` is ``await x.start()`` … ``await x.stop()``."""

    async def start(self) -> Self:
        raise NotImplementedError

    async def stop(self) -> object:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


class ServiceProcess(StartStop):
    """``python -m <module>`` as a real subprocess in a session of its own, stdout and stderr
    appended to ``log_path``; :meth:`kill` is a crash, :meth:`stop` a clean shutdown."""

    def __init__(self, module: str, env: Mapping[str, str], log_path: Path) -> None:
        self.module = module
        self.env = dict(env)
        self.log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def spawn(self) -> asyncio.subprocess.Process:
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                self.module,
                env=self.env,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        finally:
            os.close(log)
        return self.process

    async def start(self) -> Self:
        await self.spawn()
        return self

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs (an executor's leases stay until their TTL)."""
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.wait()

    async def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM and wait (graceful shutdown); SIGKILL after ``grace_s``. The exit code."""
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(grace_s):
                    await process.wait()
            except TimeoutError:
                await self.kill()
        return process.returncode


class ExecutorProcess(ServiceProcess):
    """``python -m longhaul.executor.main`` as a real subprocess; stderr goes to ``log_path``."""

    def __init__(
        self,
        nats_url: str,
        namespace: str,
        executor_id: str,
        *,
        env: Mapping[str, str] | None = None,
        lease_ttl_s: float = FAST_LEASE_TTL_S,
        log_dir: Path | None = None,
    ) -> None:
        self.nats_url = nats_url
        self.namespace = namespace
        self.executor_id = executor_id
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if log_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="lh-exec-")
            log_dir = Path(self._tmp.name)
        super().__init__(
            "longhaul.executor.main",
            executor_env(nats_url, namespace, executor_id, lease_ttl_s=lease_ttl_s, extra=env),
            log_dir / f"{executor_id}.log",
        )

    async def start(self, *, ready_timeout: float = READY_TIMEOUT_S) -> Self:
        from longhaul.core.connection import connect

        conn = await connect(NatsConfig(url=self.nats_url, namespace=self.namespace))
        try:
            kv = await conn.kv(conn.names.leases)
            with contextlib.suppress(Exception):
                await kv.purge(presence_key(self.executor_id))  # a previous life's key
            ready = asyncio.create_task(
                wait_until_ready(conn, self.executor_id, within=ready_timeout)
            )
            await asyncio.sleep(0)  # let the watch subscribe before the process can announce
            exited = asyncio.create_task((await self.spawn()).wait())
            done, _ = await asyncio.wait({ready, exited}, return_when=asyncio.FIRST_COMPLETED)
            if ready not in done:
                ready.cancel()
                raise RuntimeError(
                    f"executor {self.executor_id} exited during start-up:\n{self.log_tail()}"
                )
            exited.cancel()
            try:
                ready.result()
            except TimeoutError:
                await self.kill()
                raise RuntimeError(
                    f"executor {self.executor_id} not ready in {ready_timeout}s:\n{self.log_tail()}"
                ) from None
        finally:
            await conn.close()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await super().__aexit__(*exc_info)
        if self._tmp is not None:
            self._tmp.cleanup()


def test_config(
    nats_url: str, namespace: str, *, lease_ttl_s: float = FAST_LEASE_TTL_S, **overrides: Any
) -> LonghaulConfig:
    """A config for in-process services: this server and namespace, short leases."""
    return LonghaulConfig(
        nats=NatsConfig(url=nats_url, namespace=namespace),
        store=StoreConfig(lease_ttl_s=lease_ttl_s),
        **overrides,
    )


test_config.__test__ = False  # type: ignore[attr-defined]  # a helper, not a pytest test


class InProcessExecutor(StartStop):
    """An executor replica running in the caller's event loop, with its own connection.

    ``settings`` are ``ExecutorSettings`` fields (``tool_modules``, ``poison_attempts`` …);
    ``tools`` and ``resolve_model`` replace the configured tool registry and model registry.
    """

    def __init__(
        self,
        nats_url: str,
        namespace: str,
        executor_id: str = "exec-inproc",
        *,
        config: LonghaulConfig | None = None,
        settings: Mapping[str, Any] | None = None,
        lease_ttl_s: float = FAST_LEASE_TTL_S,
        tools: ToolRegistry | None = None,
        resolve_model: Callable[[str], Model] | None = None,
    ) -> None:
        self.config = config or test_config(nats_url, namespace, lease_ttl_s=lease_ttl_s)
        self.tools = tools
        self.resolve_model = resolve_model
        chosen = dict(settings or {})
        if self.config.working_root is None:
            chosen.setdefault("working_root", scratch_working_root(namespace))
        self.settings = ExecutorSettings(
            id=executor_id,
            sweep_interval_s=lease_ttl_s,
            ack_wait_s=max(3 * lease_ttl_s, 3),
            **chosen,
        )
        self.ctx: ServiceContext | None = None
        self._executor: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def executor(self) -> Any:
        assert self._executor is not None
        return self._executor

    async def start(self, *, ready_timeout: float = READY_TIMEOUT_S) -> Self:
        from longhaul.executor.main import build_executor

        self.ctx = await open_context("executor", self.config)
        self._executor = build_executor(
            self.ctx, self.settings, tools=self.tools, resolve_model=self.resolve_model
        )
        ready = asyncio.create_task(
            wait_until_ready(self.ctx.conn, self.settings.id, within=ready_timeout)
        )
        await asyncio.sleep(0)
        self._task = asyncio.create_task(self._executor.run(), name=f"executor-{self.settings.id}")
        done, _ = await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            self._task.result()
            raise RuntimeError(f"executor {self.settings.id} stopped during start-up")
        ready.result()
        return self

    async def stop(self) -> None:
        if self.ctx is None:
            return
        self.ctx.shutdown.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.ctx.close()
        self.ctx = None


@contextlib.asynccontextmanager
async def executor_processes(
    nats_url: str,
    namespace: str,
    count: int,
    *,
    env: Mapping[str, str] | None = None,
    prefix: str = "exec",
) -> AsyncIterator[list[ExecutorProcess]]:
    """``count`` executor subprocesses started together, stopped on exit."""
    procs = [ExecutorProcess(nats_url, namespace, f"{prefix}-{i}", env=env) for i in range(count)]
    try:
        await asyncio.gather(*(p.start() for p in procs))
        yield procs
    finally:
        await asyncio.gather(*(p.__aexit__(None, None, None) for p in procs))


# ---------------------------------------------------------------------- traces


async def create_trace(
    store: EventStore,
    task: str | list[ev.InputMessage],
    *,
    trace_id: str | None = None,
    owner: str | None = None,
    **config: Any,
) -> str:
    """Append ``TraceCreated`` (what the gateway does, filed under ``owner``) and return the
    trace id."""
    trace_id = trace_id or new_id("t")
    messages = [ev.InputMessage(role="user", content=task)] if isinstance(task, str) else task
    await store.append(
        "trace",
        trace_id,
        [
            ev.TraceCreated(
                messages=messages, config=ev.TraceConfig(**config), name="test", owner=owner
            )
        ],
        expected=Position(),
        actor="test",
    )
    return trace_id


async def append_to(store: EventStore, trace_id: str, event: ev.TraceEvent) -> TraceState:
    """Append ``event`` the way the gateway does: fold first, refuse what cannot apply."""
    state = await trace_state(store, trace_id)
    state.check(event)
    [recorded] = await store.append(
        "trace",
        trace_id,
        [event],
        expected=Position(state.stream_seq, state.version),
        actor="test",
    )
    state.apply(recorded.event, recorded.seq)
    return state


def final(state: TraceState) -> bool:
    return state.is_final


def waiting(state: TraceState) -> bool:
    return state.status == "waiting"


F = TypeVar("F", bound=Fold)


async def fold_until(
    store: EventStore,
    aggregate: Aggregate,
    aggregate_id: str,
    state: F,
    predicate: Callable[[F], bool],
    *,
    within: float,
    describe: Callable[[F], str],
) -> F:
    """Fold the aggregate's events live into ``state`` until ``predicate`` holds; after
    ``within`` seconds, TimeoutError ``"<aggregate> <id> <describe(state)>"``."""
    try:
        async with asyncio.timeout(within):
            async for recorded in store.watch(aggregate, aggregate_id):
                apply_or_skip(state, recorded.event, recorded.seq)
                if predicate(state):
                    return state
    except TimeoutError:
        raise TimeoutError(f"{aggregate} {aggregate_id} {describe(state)}") from None
    raise AssertionError("watch ended")  # pragma: no cover - watch only ends by cancellation


def _trace_reached(state: TraceState) -> str:
    summary = msgspec.json.encode(
        {
            "status": state.status,
            "wait": state.wait_reason,
            "last": state.last_sequence,
            "error": state.error,
        }
    ).decode()
    return f"did not reach the condition: {summary}"


async def wait_for_trace(
    store: EventStore,
    trace_id: str,
    predicate: Callable[[TraceState], bool] = final,
    *,
    within: float = 30.0,
) -> TraceState:
    """Fold the trace's events live until ``predicate`` holds; TimeoutError after ``within``
    seconds, with the state reached in the message."""
    return await fold_until(
        store, "trace", trace_id, TraceState(), predicate, within=within, describe=_trace_reached
    )


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float, every: float = 0.05
) -> T:
    """The first truthy result of ``probe()``, for conditions that publish nothing to wait on
    (a TTL running out); TimeoutError after ``within`` seconds."""
    async with asyncio.timeout(within):
        while True:
            result = await probe()
            if result:
                return result
            await asyncio.sleep(every)
