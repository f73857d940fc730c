"""Configuration: ``longhaul.yaml`` (path from ``LONGHAUL_CONFIG``) plus ``LONGHAUL_*`` overrides.

Nested fields are overridden with a double underscore, e.g.
``LONGHAUL_PIPELINE__LOOP_DETECTION__THRESHOLD=3``. The well-known provider variables
(``LONGHAUL_MODEL``, ``OPENAI_API_KEY`` …) are read by :class:`ModelsConfig` itself.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import yaml
from longhaul.domain.approval_rules import ApprovalConfig
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)


class ProviderConfig(BaseModel):
    """One HTTP provider endpoint. Keys come from the environment, never from the file."""

    base_url: str | None = None
    api_key: SecretStr | None = None
    max_concurrency: int = 8
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0
    max_retries: int = 5
    kind: str | None = Field(
        default=None,
        description="wire format (openai, anthropic, gemini) of a custom-named provider, "
        "e.g. vllm: {kind: openai}; defaults to the provider's name",
    )
    retry_base_delay_s: float = 0.5
    retry_max_delay_s: float = 30.0
    max_retry_after_s: float = Field(
        default=60.0,
        ge=0,
        description="a 429 asking to wait longer than this is an outage: no wait, the next "
        "model of the fallback chain takes over",
    )


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    input: float
    cached_input: float | None = None
    output: float
    cache_write: float | None = None


class LocalModelConfig(BaseModel):
    """``local:`` models: llama.cpp's server, a child process of each executor."""

    threads: int = Field(
        default_factory=lambda: max(1, min(4, os.cpu_count() or 1)),
        description="CPU threads llama.cpp decodes with",
    )
    n_ctx: int = Field(default=8192, description="context window shared by all slots")
    parallel: int = Field(default=2, description="sequences decoded at once (slots)")
    chat_template: str | None = Field(
        default=None,
        description="a Jinja chat template replacing the model's own: a file's path, or "
        "'hermes-tools' (packaged: Hermes-style <tool_call> blocks, for a model whose own "
        "template knows no tools)",
    )
    models: dict[str, Path] = Field(
        default_factory=dict,
        description="GGUF files clients may name as local:<name>; a path in a model string "
        "is the operator's only (models.default, models.roles)",
    )
    idle_s: float = Field(
        default=600.0,
        ge=0,
        description="seconds a model's server may go unused (counted from the end of its last "
        "request) before it is stopped and its memory returned; the next request starts it "
        "again. 0: never stopped",
    )
    tool_prefill: str | None = Field(
        default=None,
        description="assistant text sent last (with tool_choice required) on a request that "
        "offers tools, to make a small model call one: the chat template's call opener, e.g. "
        "'<tool_call>\\n'; only on the first tool_prefill_rounds tool rounds after a user message",
    )
    tool_prefill_rounds: int = Field(
        default=1, ge=1, description="tool rounds after a user message that tool_prefill steers"
    )
    max_tokens: int | None = Field(
        default=1024,
        ge=1,
        description="tokens per answer of a request that sets no max_tokens (a trace's own "
        "model_params.max_tokens wins): a small model unbounded rambles for many minutes. "
        "null: no bound",
    )


class CircuitConfig(BaseModel):
    """The circuit breaker per provider, shared by every executor (state in KV)."""

    failures: int = Field(
        default=5,
        ge=0,
        description="outages of one provider within window_s that open its circuit (0: no breaker)",
    )
    window_s: float = Field(default=60.0, gt=0, description="seconds failures are counted in")
    open_s: float = Field(
        default=30.0,
        gt=0,
        description="seconds an open circuit skips its provider before one call probes it",
    )


class ModelsConfig(BaseModel):
    default: str = Field(default_factory=lambda: os.environ.get("LONGHAUL_MODEL", "scripted:auto"))
    roles: dict[str, str] = Field(
        default_factory=dict, description="per-role models: utility, planner, verifier"
    )
    fallback: list[str] = Field(
        default_factory=list,
        description="models tried in order when the default model's provider is down "
        "(connect errors, 5xx, 429 past max_retry_after_s, quota, timeout)",
    )
    roles_fallback: dict[str, list[str]] = Field(
        default_factory=dict, description="per-role fallback chains (as fallback)"
    )
    circuit: CircuitConfig = Field(default_factory=CircuitConfig)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    context_limits: dict[str, int] = Field(default_factory=dict)
    local: LocalModelConfig = Field(default_factory=LocalModelConfig)
    scripted_dir: Path | None = Field(
        default_factory=lambda: _env_path("LONGHAUL_MODELS__SCRIPTED_DIR"),
        description="the only directory scripted:<file> models are read from (unset: none; "
        "scripted:auto needs no file)",
    )

    def for_role(self, role: str) -> str:
        return self.roles.get(role, self.default)

    def fallback_for(self, model: str) -> list[str]:
        """The configured chain after ``model``: the default's, or the chain of a role whose
        model it is (none for another model)."""
        if model == self.default:
            return self.fallback
        for role, role_model in self.roles.items():
            if role_model == model:
                return self.roles_fallback.get(role, [])
        return []

    def operator_strings(self) -> set[str]:
        """The model strings the operator wrote (the default, every role's and every fallback),
        which may name things a client's may not, such as a ``local:`` path."""
        chains = [model for chain in self.roles_fallback.values() for model in chain]
        return {self.default, *self.roles.values(), *self.fallback, *chains}

    @property
    def is_offline_default(self) -> bool:
        return self.default.startswith("scripted:")


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name, "").strip()
    return Path(value) if value else None


class CheckpointConfig(BaseModel):
    enabled: bool = True
    ttl_seconds: int = 604_800


class LoopDetectionConfig(BaseModel):
    window_size: int = 5
    threshold: int = 2
    tool_freq_warn: int = 30
    tool_freq_stop: int = 50


class DenyRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str = Field(description="a Python regular expression searched in the command")
    reason: str = Field(min_length=1, description="what the refusal says")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return pattern


class GuardrailConfig(BaseModel):
    """The Guardrail middleware's policy for ``bash`` (``longhaul.agent.guardrail_policy``)."""

    model_config = ConfigDict(extra="forbid")

    allow_commands: list[str] | None = None
    """Allow-list mode: only these programs may start a simple command (by the name the
    command gives, ``git`` is not ``/usr/bin/git``), and command substitution is refused.
    None: any program the deny rules let through."""
    deny: list[DenyRule] = Field(default_factory=list)
    """Refusals added to the built-in deny list (which always applies)."""

    @field_validator("allow_commands")
    @classmethod
    def _program_names(cls, names: list[str] | None) -> list[str] | None:
        if names is None:
            return None
        if not names:
            raise ValueError("an empty list would refuse every command; leave it out instead")
        for name in names:
            if not name or any(ch.isspace() for ch in name):
                raise ValueError(f"{name!r} is not a program name (one word, no spaces)")
        return names


class CompressionConfig(BaseModel):
    headroom_threshold: float = 0.8
    min_tokens: int = 8000


class StreamingConfig(BaseModel):
    flush_interval_ms: int = 50


class VerificationConfig(BaseModel):
    max_reinjections: int = 1


class PromptCacheConfig(BaseModel):
    enable: bool = True


class OffloadConfig(BaseModel):
    """One-time tool outputs (``read``, ``workspace_read``, an offloaded ``bash`` output…)
    are shown in full once, then as a short note that says how to get them back. ``enable``
    off keeps every output in the history in full (the size of each is still bounded by the
    tools' ``output_cap``): far more input tokens, for comparison only."""

    enable: bool = True


class MiddlewareEntry(BaseModel):
    """A built-in (by ``name``: switch off or reorder) or an operator's own middleware
    (``use``: ``package.module:Class`` or an entry point of the ``longhaul.middleware``
    group), placed ``before`` or ``after`` another middleware and built with ``options``."""

    model_config = ConfigDict(extra="forbid")

    name: str
    enabled: bool = True
    use: str | None = None
    before: str | None = None
    after: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class DelegationConfig(BaseModel):
    """Bounds on sub-agents (``agent`` / ``evaluate``), counted on the log."""

    max_depth: int = Field(default=2, ge=1)
    """Levels of sub-traces below a root (a trace at this depth cannot delegate)."""
    max_descendants: int = Field(default=50, ge=1)
    """Sub-traces a root may have in all, at every level."""


class RoutingConfig(BaseModel):
    """``POST /api/runs`` in ``auto`` mode: complexity above ``team_above`` plans a team (a
    task), from ``skill_above`` one agent with its skills, below plain ReAct (both a trace)."""

    team_above: float = Field(default=0.7, ge=0, le=1)
    skill_above: float = Field(default=0.3, ge=0, le=1)
    use_model: bool = True
    """Ask the utility model for the estimate (rules when it is offline or fails)."""


class PipelineConfig(BaseModel):
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    max_concurrent_phases: int = 3
    max_phases: int = 10
    max_replan_attempts: int = 2
    single_agent_fallback: bool = True
    """After the last replan, one agent does what is left of the goal before the task fails."""
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    plan_model_check: bool = True
    """After a model plan passes the rule checks, the utility model reviews the decomposition
    (coverage, parallelism, redundancy); its problems go back to the planner model once."""
    plan_worked_example: bool = True
    """Show the planner model a worked example of a good plan in its prompt."""
    plan_review: bool = False
    """Tasks wait in ``awaiting_review`` for a person to approve, edit or refuse their plan
    (a task's own ``review`` wins)."""
    loop_detection: LoopDetectionConfig = Field(default_factory=LoopDetectionConfig)
    guardrail: GuardrailConfig = Field(default_factory=GuardrailConfig)
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)
    verification: VerificationConfig = Field(default_factory=VerificationConfig)
    prompt_cache: PromptCacheConfig = Field(default_factory=PromptCacheConfig)
    offload: OffloadConfig = Field(default_factory=OffloadConfig)
    middleware: list[MiddlewareEntry] = Field(default_factory=list)
    max_iterations: int = 50
    """Model calls per run (a trace's or preset's own value wins)."""
    max_continuations: int = Field(default=2, ge=0)
    """Times the model is asked to continue an answer cut at the output length limit before
    the trace fails ``truncated``."""
    max_concurrent_subtraces: int = 3
    delegation: DelegationConfig = Field(default_factory=DelegationConfig)
    context_injection_every: int = 10
    context_hooks: list[str] = Field(default_factory=list)
    """Context hooks (``package.module:function`` or an entry point of the
    ``longhaul.context_hooks`` group) called on each context injection."""
    titles: bool = True
    """A trace created without a name gets one from the utility model when its first run
    ends (``trace_titled``); until then, and with this off, the first message is its name."""
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    """Risk rules for tool approval and wait deadlines (``longhaul.domain.approval_rules``)."""


class SandboxConfig(BaseModel):
    """How tool processes (``bash``, the verifier's command check) are confined.

    ``auto`` uses bubblewrap when it works here and otherwise refuses to run them; ``bwrap``
    insists on it; ``none`` runs them unconfined (an explicit operator opt-out). The limits
    apply in every mode (``setrlimit``); a root service runs confined tools as ``uid`` (host
    root inside the sandbox could write ``/proc/sys`` and ignores ``max_processes``).
    """

    mode: Literal["auto", "bwrap", "none"] = "auto"
    network: bool = False
    """Share the host's network with tool processes (off: only a private loopback)."""
    cpu_s: int = Field(default=600, ge=1, description="CPU seconds per process")
    memory_mb: int = Field(default=4096, ge=16, description="address space per process")
    max_processes: int = Field(default=1024, ge=8)
    file_mb: int = Field(default=1024, ge=1, description="largest file a process may write")
    tmp_mb: int = Field(default=256, ge=1, description="size of the private /tmp (and /var/tmp)")
    workdir_mb: int = Field(
        default=10240,
        ge=1,
        description="disk a working directory may use: a tool process is refused once it is over",
    )
    cgroups: bool = Field(
        default=True,
        description="run each bash command's process tree in a cgroup of its own (memory_mb and "
        "max_processes for the whole tree) where the host lets this service manage cgroups",
    )
    uid: int = Field(
        default=65534,
        ge=1,
        description="unprivileged user (and group) tool processes run as when the service runs "
        "as root; their working directory is handed to it before each run",
    )
    read_only: list[str] = Field(
        default_factory=list,
        description="extra host paths tool processes may read (e.g. a toolchain in /opt)",
    )


class VerifierCommand(BaseModel):
    """One command check the operator allows clients to name (``{"check": "<name>"}``)."""

    model_config = ConfigDict(extra="forbid")

    command: str | list[str] = Field(min_length=1)
    """A shell command line (``/bin/sh -c``) or an argv list; the answer arrives on stdin."""
    cwd: str | None = None
    """Relative to the trace's working directory (the default); a keyed trace's check must
    stay inside that directory."""
    timeout_s: float = Field(default=300.0, gt=0, le=86400)
    output_cap: int = Field(default=64 * 1024, ge=256)
    env: dict[str, str] = Field(default_factory=dict)


class VerifierConfig(BaseModel):
    commands: dict[str, VerifierCommand] = Field(default_factory=dict)
    """The command checks clients may name; a client never supplies a command."""


class MemoryConfig(BaseModel):
    """Experiences (``longhaul.domain.experiences``) and skills."""

    categories: list[str] = Field(
        default_factory=lambda: ["tool_usage", "logic_flow", "environment"],
        min_length=1,
        description="the categories an experience may have",
    )
    recall: bool = Field(
        default=True,
        description="new traces start with the top matching experiences of their key "
        "(a trace's or preset's `experiences: false` turns it off)",
    )
    top_k: int = Field(default=3, ge=1, le=20, description="experiences shown to a new trace")
    capture_on_completion: bool = Field(
        default=False,
        description="a root trace's run that completes first reflects into experiences "
        "(as POST /reflect does) and records them as experiences_captured",
    )
    skills_dir: Path | None = Field(
        default=None,
        description="project skills (<name>.md or <name>/SKILL.md); they override the "
        "built-in skills of the same name",
    )


class McpServerConfig(BaseModel):
    """One MCP server whose tools the executor offers as ``<server>__<tool>``: a command
    spoken to over stdio, or a streamable-HTTP ``url``. ``${VAR}`` in ``env``, ``headers`` and
    ``headers_per_key`` is taken from the executor's environment when the server starts (a
    secret stays out of the file); the command gets only those variables and the SDK's safe
    defaults.

    A command server runs once per API key (``scope: key``) or per trace family (``scope:
    family``), in the sandbox ``bash`` runs in, with that key's (family's) working directory as
    its cwd and only writable path; it starts on first use and stops after ``idle_s`` unused.
    ``read_only`` lists host paths it may read besides the system's (its interpreter, its
    code). A ``url`` server is one session per key when ``headers_per_key`` gives each key its
    credentials. ``shared: true`` is one process (or session) for every key, unconfined, as an
    operator-trusted service: give it nothing key-specific; its tools are offered only by
    presets whose ``allowed_tools`` name it (``<server>__…``)."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    """A ``shared`` command server's working directory (a per-key one runs in the key's)."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    headers_per_key: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Key id (``k_…``, as in ``GET /api/me``) → headers added for that key's session; a key
    with no entry gets no session (its calls are refused)."""
    shared: bool = False
    scope: Literal["key", "family"] = "key"
    idle_s: float = Field(
        default=300.0, gt=0, description="a per-key server unused this long is stopped"
    )
    read_only: list[str] = Field(default_factory=list)
    call_timeout_s: float = Field(default=60.0, gt=0, le=3600, description="one tool call")
    connect_timeout_s: float = Field(default=30.0, gt=0, le=600, description="start + listing")
    restart_max_delay_s: float = Field(
        default=30.0, gt=0, description="longest pause between restarts of a dead server"
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd or self.read_only):
            raise ValueError(
                "args, env, cwd and read_only belong to a command server, not a url one"
            )
        if self.command is not None and (self.headers or self.headers_per_key):
            raise ValueError("headers belong to a url server, not a command one")
        if self.cwd is not None and not self.shared:
            raise ValueError("cwd: a per-key server runs in the key's directory (shared: true?)")
        if self.url is not None and not self.shared and not self.headers_per_key:
            raise ValueError(
                "a url server without headers_per_key is one session for every key: set "
                "shared: true (and give it nothing key-specific), or headers_per_key"
            )
        if self.shared and self.headers_per_key:
            raise ValueError("headers_per_key makes a per-key server; drop shared: true")
        return self

    @property
    def per_key(self) -> bool:
        """One process (session) per key or family rather than one for every key."""
        return not self.shared


class WebSearchConfig(BaseModel):
    """The ``web_search`` tool's backend; keys come from ``TAVILY_API_KEY`` /
    ``BRAVE_API_KEY``. ``url`` is SearXNG's base URL (required for it); for Tavily and
    Brave it replaces the public endpoint (a proxy, a test server)."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["searxng", "tavily", "brave"]
    url: str | None = Field(default=None, pattern=r"^https?://")
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_s: float = Field(default=15.0, gt=0, le=120)

    @model_validator(mode="after")
    def _searxng_url(self) -> WebSearchConfig:
        if self.provider == "searxng" and self.url is None:
            raise ValueError("web_search: provider searxng needs the url of its instance")
        return self


OnUnknown = Literal["ask", "model", "rerun"]
"""What a resumed turn does with a call a crash cut off while it acted (its outcome is
unknown): wait for a person, tell the model it was cut off (with what can be known), or run it
again with the same idempotency key."""


class ToolsConfig(BaseModel):
    """Tools beyond the built-ins; each is offered only when configured here."""

    model_config = ConfigDict(extra="forbid")

    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    web_search: WebSearchConfig | None = None
    webfetch_allow_private: bool = Field(
        default=False,
        description="let webfetch reach loopback, private and link-local addresses (a lab "
        "network, a local dev server); off: only global unicast ones",
    )
    secrets: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="what each of your tools may read as ctx.secrets: {tool: {name: "
        "ENVIRONMENT_VARIABLE of the executor}}; never shown to the model, never logged",
    )
    on_unknown: dict[str, OnUnknown] = Field(
        default_factory=dict,
        description="per tool, what happens to a call a crash cut off while it acted: ask (a "
        "person decides), model (the model is told, and inspects), rerun (same idempotency "
        "key); unset: the tool's own default (bash, write, edit: model; idempotent: rerun; "
        "a reconcile hook: reconciled; other tools with effects: ask)",
    )

    @field_validator("mcp_servers")
    @classmethod
    def _server_names(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,31}", name):
                raise ValueError(
                    f"MCP server name {name!r}: use letters, digits and '-' (at most 32), "
                    "so that '<server>__<tool>' names stay unambiguous"
                )
        return value


class RemoteAgentConfig(BaseModel):
    """Another longhaul the ``agent`` tool may delegate to (``agent_url`` names it or its
    URL; nothing else is ever contacted), or with ``protocol: a2a`` any A2A agent."""

    url: str = Field(
        pattern=r"^https?://[^/\s]+(/\S*)?$",
        description="the remote gateway's base URL (a2a: where the agent card is found, "
        "<url>/.well-known/agent-card.json)",
    )
    protocol: Literal["longhaul", "a2a"] = Field(
        default="longhaul",
        description="longhaul: another longhaul's /api; a2a: any A2A agent, through a2a-sdk",
    )
    api_key_env: str | None = Field(
        default=None, description="environment variable holding the remote gateway's API key"
    )
    timeout_s: float = Field(default=10.0, gt=0, description="per HTTP request")
    poll_s: float = Field(default=2.0, gt=0, description="between status checks while waiting")
    give_up_s: float = Field(
        default=3600.0, gt=0, description="unreachable this long: the child counts as failed"
    )
    max_response_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="the largest answer read from the remote (one HTTP body; an A2A agent's "
        "card too); a larger one is not read and fails the child",
    )

    @model_validator(mode="after")
    def _base_url_only_for_longhaul(self) -> RemoteAgentConfig:
        if self.protocol == "longhaul" and urlsplit(self.url).path not in ("", "/"):
            raise ValueError("a longhaul remote's url is the gateway's base URL, without a path")
        return self


class PeriodLimit(BaseModel):
    """What a key may spend in one period (``None``: no limit on that measure)."""

    model_config = ConfigDict(extra="forbid")

    usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    tokens: int | None = Field(default=None, ge=0, description="prompt + completion tokens")

    @property
    def max_tokens(self) -> int | None:
        return self.tokens

    @property
    def max_cost(self) -> float | None:
        return self.usd


class KeyLimits(BaseModel):
    """A key's limits per UTC day and UTC month."""

    model_config = ConfigDict(extra="forbid")

    day: PeriodLimit | None = None
    month: PeriodLimit | None = None


class SpendLimitsConfig(BaseModel):
    """What each key may spend per UTC day and month (``longhaul.domain.spend``); a run at a
    limit waits for an answer (``budget``), it does not fail."""

    model_config = ConfigDict(extra="forbid")

    default: KeyLimits = Field(default_factory=KeyLimits)
    keys: dict[str, KeyLimits] = Field(
        default_factory=dict,
        description="key id (k_…, as in GET /api/me) → its limits, each period replacing the "
        "default's",
    )
    keys_answer: bool = Field(
        default=False,
        description="a key may answer its own runs' budget waits (raise or stop); otherwise "
        "only an admin key (gateway.admin_keys) may",
    )

    def of(self, owner: str) -> KeyLimits:
        """``owner``'s limits: its own periods, the default's for the others."""
        own = self.keys.get(owner)
        if own is None:
            return self.default
        return KeyLimits(day=own.day or self.default.day, month=own.month or self.default.month)


class ConfigError(Exception):
    """The configuration file or environment is invalid; the message says where."""


class LonghaulSettings(BaseSettings):
    """Where every piece of the configuration tree is read from: ``LONGHAUL_*`` variables
    (``__`` between nested names) over ``longhaul.yaml`` (path in ``LONGHAUL_CONFIG``). The
    whole tree is ``longhaul.core.config.LonghaulConfig``; a process that needs one section
    (the sandbox's health check) reads just that one (:func:`load_section`)."""

    model_config = SettingsConfigDict(
        env_prefix="LONGHAUL_", env_nested_delimiter="__", extra="ignore"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = os.environ.get("LONGHAUL_CONFIG")
        if path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)


def check_config_file() -> None:
    """Refuse a ``LONGHAUL_CONFIG`` that is no file or no YAML, naming it."""
    path = os.environ.get("LONGHAUL_CONFIG")
    if path and not Path(path).is_file():
        raise ConfigError(f"LONGHAUL_CONFIG points at {path!r}, which is not a file")
    if path:
        try:
            yaml.safe_load(Path(path).read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {exc}") from exc


S = TypeVar("S", bound=BaseModel)


def load_section(name: str, section: type[S]) -> S:
    """One section of the configuration, read as the whole tree is (file and environment)."""
    check_config_file()
    fields: dict[str, Any] = {name: (section, Field(default_factory=section))}
    model = create_model(f"{section.__name__}Only", __base__=LonghaulSettings, **fields)
    try:
        loaded: S = getattr(model(), name)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return loaded
