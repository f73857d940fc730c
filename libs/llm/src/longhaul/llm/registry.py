"""Model strings (``provider:model``) to :class:`Model` objects.

Remote providers share one pooled ``httpx.AsyncClient`` (and one concurrency/rate budget) per
configured endpoint, however many models and traces use it; :meth:`ModelRegistry.aclose`
releases them. Endpoint settings come from ``ModelsConfig.providers[<name>]`` and, where that
is silent, from ``<NAME>_BASE_URL`` / ``<NAME>_API_KEY`` (``OPENAI_…``, ``ANTHROPIC_…``,
``GEMINI_…``). A custom name maps to a wire format with ``kind``, e.g. ``vllm: {kind: openai,
base_url: …}`` makes ``vllm:llama-3`` an OpenAI-compatible model.

``local:smollm2`` / ``local:/path/model.gguf`` run llama.cpp's server in a child process
(:mod:`longhaul.llm.local`, optional extra ``longhaul[local]``) and speak to it through the
OpenAI codec; ``models.local`` sets threads, context, chat template and how long an unused
server is kept (``idle_s``). The registry owns those servers: :meth:`ModelRegistry.aclose`
stops them.

``scripted:demo`` is an offline agent worth watching (plans, reads, writes, delegates).
``scripted:auto``, ``scripted:demo`` and ``scripted:<file.yaml>`` take options as a query string:
``scripted:auto?latency_ms=50&chunk=4``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import parse_qs

import httpx
from longhaul.domain.config import ModelsConfig, ProviderConfig
from longhaul.llm.http_model import Codec, Endpoint, HttpModel
from longhaul.llm.limits import CallLimits, RateLimiter
from longhaul.llm.local import (
    LocalModel,
    LocalServers,
    ServerSpec,
    model_path,
    refuse_unlisted,
    require_xllamacpp,
)
from longhaul.llm.providers.anthropic import AnthropicCodec
from longhaul.llm.providers.gemini import GeminiCodec
from longhaul.llm.providers.openai import OpenAICodec
from longhaul.llm.retry import RetryPolicy
from longhaul.llm.scripted import ScriptedModel, ScriptFn, auto_turn, demo_turn, load_script
from longhaul.llm.tool_prefill import ToolPrefill
from longhaul.llm.types import Model

CODECS: dict[str, Callable[[], Codec]] = {
    "openai": OpenAICodec,
    "anthropic": AnthropicCodec,
    "gemini": GeminiCodec,
}
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
}
KEY_REQUIRED = frozenset({"anthropic", "gemini"})
"""OpenAI-compatible servers (Ollama, llama.cpp) often run without a key; these never do."""


class UnknownProviderError(ValueError):
    """The model string names a provider that is neither built in nor configured."""


class MissingApiKeyError(ValueError):
    """A provider that always needs a key has none in the configuration or environment."""


def split_model_string(model_string: str) -> tuple[str, str]:
    provider, sep, model = model_string.partition(":")
    if not sep or not provider or not model:
        raise ValueError(
            f"model string {model_string!r} must look like 'provider:model', "
            "e.g. 'openai:gpt-4o' or 'scripted:auto'"
        )
    return provider, model


BUILTIN_SCRIPTS = frozenset({"auto", "demo"})
DEMO_LATENCY_MS = 300
"""scripted:demo pauses before each turn (unless latency_ms says otherwise): a run to watch."""


def scripted_path(model_string: str, source: str, scripted_dir: Path | None) -> Path:
    """The script file ``scripted:<source>`` names, if it lies inside ``scripted_dir``.

    Clients choose model strings, so a path is only ever read from the directory the operator
    set (``models.scripted_dir``), and errors never quote the file."""
    if scripted_dir is None:
        raise ValueError(
            f"{model_string}: script files are disabled (set models.scripted_dir, "
            "LONGHAUL_MODELS__SCRIPTED_DIR, to allow scripted:<file> from that directory)"
        )
    root = scripted_dir.resolve()
    path = (root / source).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        raise ValueError(f"{model_string}: no such script in models.scripted_dir")
    return path


def provider_kind(model_string: str, provider: str, config: ModelsConfig) -> str:
    """The wire format of ``provider`` (built in, or a configured name's ``kind``)."""
    kind = config.providers.get(provider, ProviderConfig()).kind or provider
    if kind not in CODECS:
        known = sorted({*CODECS, "scripted", "local", *config.providers})
        raise UnknownProviderError(
            f"unknown provider {provider!r} in {model_string!r} "
            f"(known: {', '.join(known)}; configure others with models.providers.<name>."
            "kind = openai | anthropic | gemini)"
        )
    return kind


def check_model_string(model_string: str, config: ModelsConfig) -> None:
    """What a gateway can refuse before a run starts (422): a malformed string, a provider
    that is neither built in nor configured, or a script outside ``models.scripted_dir``.
    Provider reachability is the run's business."""
    provider, spec = split_model_string(model_string)
    if provider not in ("scripted", "local"):
        provider_kind(model_string, provider, config)
    source = spec.partition("?")[0]
    if provider == "scripted" and source not in BUILTIN_SCRIPTS:
        scripted_path(model_string, source, config.scripted_dir)
    if provider == "local":
        refuse_unlisted(spec, config)


def _scripted(model_string: str, spec: str, scripted_dir: Path | None) -> ScriptedModel:
    source, _, query = spec.partition("?")
    options = {key: values[-1] for key, values in parse_qs(query).items()}
    try:
        default_latency = DEMO_LATENCY_MS if source == "demo" else 0
        latency_s = float(options.get("latency_ms", default_latency)) / 1000
        chunk = int(options.get("chunk", 8))
    except ValueError as exc:
        raise ValueError(f"{model_string}: bad option: {exc}") from exc
    if source == "auto":
        script: ScriptFn = auto_turn
    elif source == "demo":
        script = demo_turn
    else:
        script = load_script(scripted_path(model_string, source, scripted_dir))
    return ScriptedModel(script, name=model_string, latency_s=latency_s, chunk_chars=chunk)


def is_offline(model_string: str) -> bool:
    """``scripted:auto`` invents schema-shaped answers: callers that act on a model's judgement
    (plans, routes, verdicts) treat it as no model and take their rule-based paths."""
    return model_string.startswith("scripted:auto")


def is_scripted(model_string: str) -> bool:
    """A script answers what it was written to answer, never a judgement of its input: the
    router's estimate and the plan check take their rules instead of any ``scripted:`` model
    (``scripted:demo`` would call every goal a 1.00 team job)."""
    return model_string.startswith("scripted:")


class ModelRegistry:
    """Resolves model strings; owns the HTTP clients of the endpoints it created."""

    def __init__(
        self, config: ModelsConfig | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.config = config or ModelsConfig()
        self._env = env if env is not None else os.environ
        self._endpoints: dict[tuple[str, str], Endpoint] = {}
        self.local_servers = LocalServers(self.config.local.idle_s, self._forget_local)

    def resolve(self, model_string: str, config: ModelsConfig | None = None) -> Model:
        config = config or self.config
        provider, model = split_model_string(model_string)
        if provider == "scripted":
            return _scripted(model_string, model, config.scripted_dir)
        if provider == "local":
            return self._local(model_string, model, config)
        settings = config.providers.get(provider, ProviderConfig())
        kind = provider_kind(model_string, provider, config)
        codec_factory = CODECS[kind]
        endpoint = self._endpoint(provider, kind, settings, codec_factory())
        return HttpModel(model_string, model, endpoint, codec_factory())

    def _local(self, model_string: str, spec: str, config: ModelsConfig) -> Model:
        require_xllamacpp()  # fail at resolve time with the install hint, not mid-trace
        server = ServerSpec.from_config(model_path(spec, config), config.local)
        settings = config.providers.get("local", ProviderConfig())
        local = config.local
        prefill = (
            ToolPrefill(local.tool_prefill, local.tool_prefill_rounds)
            if local.tool_prefill
            else None
        )

        def connect(base_url: str) -> HttpModel:
            # llama.cpp ignores tool_choice objects: a named choice narrows the tools instead
            codec = OpenAICodec(
                named_tool_choice=False,
                prompt_cache_key=False,
                cache_prompt=True,
                tool_prefill=prefill,
                max_tokens=local.max_tokens,
            )
            endpoint = self._endpoint(
                "local", "openai", settings.model_copy(update={"base_url": base_url}), codec
            )
            return HttpModel(model_string, spec, endpoint, codec)

        return LocalModel(model_string, server, self.local_servers, connect)

    async def _forget_local(self, base_url: str) -> None:
        """A local server stopped: close the HTTP client that spoke to its port."""
        stale = [k for k in self._endpoints if k[0] == "local" and k[1].startswith(f"{base_url}|")]
        for key in stale:
            await self._endpoints.pop(key).aclose()

    def for_role(self, role: str) -> Model:
        """The model configured for ``role`` (planner, verifier, utility …) or the default."""
        return self.resolve(self.config.for_role(role))

    def _endpoint(self, name: str, kind: str, settings: ProviderConfig, codec: Codec) -> Endpoint:
        prefix = name.upper().replace("-", "_")
        base_url = (
            settings.base_url or self._env.get(f"{prefix}_BASE_URL") or DEFAULT_BASE_URLS[kind]
        )
        secret = settings.api_key.get_secret_value() if settings.api_key else None
        api_key = secret or self._env.get(f"{prefix}_API_KEY")
        if not api_key and kind in KEY_REQUIRED:
            raise MissingApiKeyError(f"{name}: no API key; set {prefix}_API_KEY")
        key = (name, f"{base_url}|{api_key}|{settings.model_dump_json(exclude={'api_key'})}")
        if key not in self._endpoints:
            self._endpoints[key] = Endpoint(
                provider=name,
                client=httpx.AsyncClient(
                    base_url=base_url,
                    headers=codec.auth_headers(api_key),
                    timeout=httpx.Timeout(
                        settings.read_timeout_s, connect=settings.connect_timeout_s
                    ),
                    limits=httpx.Limits(
                        max_connections=settings.max_concurrency,
                        max_keepalive_connections=settings.max_concurrency,
                    ),
                ),
                limits=CallLimits(
                    settings.max_concurrency,
                    RateLimiter(settings.requests_per_minute, settings.tokens_per_minute),
                ),
                retry=RetryPolicy(
                    max_retries=settings.max_retries,
                    base_delay_s=settings.retry_base_delay_s,
                    max_delay_s=settings.retry_max_delay_s,
                    max_retry_after_s=settings.max_retry_after_s,
                ),
            )
        return self._endpoints[key]

    async def aclose(self) -> None:
        """Stop the local model servers, close the HTTP clients."""
        await self.local_servers.aclose()
        endpoints, self._endpoints = list(self._endpoints.values()), {}
        for endpoint in endpoints:
            await endpoint.aclose()

    async def __aenter__(self) -> ModelRegistry:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


_default = ModelRegistry()


def resolve_model(model_string: str, config: ModelsConfig | None = None) -> Model:
    """Resolve with the process-wide registry (clients shared across calls); see ``close``."""
    return _default.resolve(model_string, config)


async def close() -> None:
    """Release the process-wide registry's HTTP clients (call at shutdown)."""
    await _default.aclose()
