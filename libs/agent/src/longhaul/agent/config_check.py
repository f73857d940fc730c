"""Configuration checked once, before anything starts (``longhaul up`` and every service).

What the executor would only find when it builds its middleware chain (an unknown or
misplaced ``pipeline.middleware`` entry, an operator class that does not load, a model string
that is not ``provider:model``) is found here, so a bad config stops the process with a
message naming the key instead of crash-looping behind a healthy-looking gateway.
"""

from __future__ import annotations

from typing import Any, Protocol

from longhaul.agent.context_hooks import ContextHooks
from longhaul.agent.middleware import default_middleware
from longhaul.agent.presets import PresetCatalog
from longhaul.domain.config import ConfigError, ModelsConfig, PipelineConfig
from longhaul.llm.registry import check_model_string, split_model_string


class EngineConfig(Protocol):
    """The sections of the configuration tree (``longhaul.core.config.LonghaulConfig``) the
    engine is built from."""

    @property
    def pipeline(self) -> PipelineConfig: ...
    @property
    def models(self) -> ModelsConfig: ...
    @property
    def presets(self) -> dict[str, dict[str, Any]]: ...


def check_config(config: EngineConfig) -> None:
    """Raise :class:`ConfigError` naming the first bad key."""
    try:
        default_middleware(config.pipeline)
        ContextHooks.configured(config.pipeline.context_hooks)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    models = [("models.default", config.models.default)]
    models += [(f"models.roles.{role}", model) for role, model in config.models.roles.items()]
    for key, model in models:
        try:
            split_model_string(model)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from exc
    _check_chains(config)


def _check_chains(config: EngineConfig) -> None:
    """Every fallback chain's models exist here (a provider built in or configured, a script
    or local model the deployment has): refused at start, not when an outage needs them."""
    chains = [("models.fallback", config.models.fallback)]
    chains += [(f"models.roles_fallback.{r}", c) for r, c in config.models.roles_fallback.items()]
    try:
        catalog = PresetCatalog(config.presets)
    except ValueError as exc:
        raise ConfigError(f"presets: {exc}") from exc
    for name in config.presets:
        chain = catalog.get(name).model_fallback
        chains += [(f"presets.{name}.model_fallback", chain or [])]
    for key, chain in chains:
        for index, model in enumerate(chain):
            try:
                check_model_string(model, config.models)
            except ValueError as exc:
                raise ConfigError(f"{key}[{index}]: {exc}") from exc
