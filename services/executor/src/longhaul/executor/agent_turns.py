"""The pure engine (``longhaul.agent.engine.Engine``) bound to what an executor provides:
its tools, the pipeline config, presets, the shared workspace and the model registry.

One :class:`AgentTurns` serves every turn of a replica. A trace whose model string cannot be
resolved (unknown provider, missing key, a script file that is not there) fails at once with
the reason instead of being retried as a poison event. A trace runs on the model a provider
outage moved it to (``TraceState.model``), with the rest of its fallback chain after it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from longhaul.agent.context_hooks import ContextHooks
from longhaul.agent.contract import (
    EventSink,
    LiveCallback,
    Messenger,
    ProviderBreaker,
    StopSignal,
    TurnOutcome,
)
from longhaul.agent.engine import Engine
from longhaul.agent.env import AgentEnv, AncestorBudget, SpendLimits, StorageCheck
from longhaul.agent.experiences import ExperienceBook
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.skills import SkillIndex, skill_dirs
from longhaul.agent.tools import ToolRegistry, ToolSettings
from longhaul.agent.tools.sandbox import Sandbox
from longhaul.agent.workspace import Workspace
from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev
from longhaul.domain.replay import replayed_trace
from longhaul.domain.state import TraceState
from longhaul.executor.replay import Recordings
from longhaul.executor.tools import tool_on_unknown, tool_secrets
from longhaul.llm.fallback import chain_after
from longhaul.llm.registry import ModelRegistry
from longhaul.llm.types import Model

log = logging.getLogger(__name__)

ModelResolver = Callable[[str], Model]


class AgentTurns:
    def __init__(
        self,
        config: LonghaulConfig,
        tools: ToolRegistry,
        *,
        workspace: Workspace | None,
        working_root: Path,
        resolve_model: ModelResolver | None = None,
        ancestor_budget: AncestorBudget | None = None,
        storage_full: StorageCheck | None = None,
        messenger: Messenger | None = None,
        experiences: ExperienceBook | None = None,
        recordings: Recordings | None = None,
        breaker: ProviderBreaker | None = None,
        spend: SpendLimits | None = None,
    ) -> None:
        self.config = config
        self.recordings = recordings
        self._registry = ModelRegistry(config.models)
        self.resolve_model = resolve_model or self._registry.resolve
        self.presets = PresetCatalog(config.presets)
        self.engine = Engine(
            tools=tools,
            config=config.pipeline,
            env=AgentEnv(
                presets=self.presets,
                skills=SkillIndex.load(skill_dirs(config.memory.skills_dir)),
                workspace=workspace,
                working_root=working_root,
                tool_settings=ToolSettings(
                    sandbox=config.sandbox,
                    max_delegation_depth=config.pipeline.delegation.max_depth,
                    max_descendants=config.pipeline.delegation.max_descendants,
                    webfetch_allow_private=config.tools.webfetch_allow_private,
                    remote_agents={name: r.url for name, r in config.remote_agents.items()},
                    secrets=tool_secrets(config.tools, os.environ),
                    on_unknown=tool_on_unknown(config.tools, tools),
                ),
                models=config.models,
                ancestor_budget=ancestor_budget,
                storage_full=storage_full,
                messenger=messenger,
                context_hooks=ContextHooks.configured(config.pipeline.context_hooks),
                experiences=experiences,
                memory=config.memory,
                breaker=breaker,
                spend=spend,
            ),
        )
        sandbox = Sandbox(config.sandbox)
        log.log(sandbox.log_level(), "bash: %s", sandbox.describe())

    async def __call__(
        self,
        state: TraceState,
        sink: EventSink,
        live: LiveCallback,
        stop_signal: StopSignal | None = None,
    ) -> TurnOutcome:
        models = self.config.models
        configured = state.config.model or models.default
        try:
            model = await self._model(state, state.model or configured)
            utility = self.resolve_model(models.for_role("utility"))
        except ValueError as exc:
            log.warning("trace %s: model not usable: %s", state.trace_id, exc)
            failed = ev.Failed(error=f"model not usable: {exc}", stop_reason="config_error")
            await sink.emit([failed])
            return TurnOutcome(end="failed", stop_reason="config_error")
        return await self.engine.run_turn(
            state,
            sink,
            model=model,
            utility_model=utility,
            live=live,
            stop_signal=stop_signal,
            fallback=self._fallback(state, configured, model.name),
        )

    def _chain(self, state: TraceState, configured: str) -> list[str]:
        """The trace's own chain, else its preset's, else the configured one for its model."""
        if state.config.model_fallback is not None:
            return state.config.model_fallback
        preset = self.presets.get(state.config.preset).model_fallback
        if preset is not None:
            return preset
        return self.config.models.fallback_for(configured)

    def _fallback(self, state: TraceState, configured: str, current: str) -> list[Model]:
        """The models after ``current`` in the trace's chain; one that cannot be resolved here
        (a key this executor lacks) is left out, with a warning, rather than failing a trace
        that may never need it."""
        models: list[Model] = []
        for name in chain_after([configured, *self._chain(state, configured)], current):
            try:
                models.append(self.resolve_model(name))
            except ValueError as exc:
                log.warning("trace %s: fallback %s not usable: %s", state.trace_id, name, exc)
        return models

    async def _model(self, state: TraceState, model_string: str) -> Model:
        """The trace's model; ``replay:<trace id>`` plays a recording of the same key."""
        if replayed_trace(model_string) is not None:
            if self.recordings is None:
                raise ValueError("replays need the trace log (no recordings configured)")
            return await self.recordings.model(state, model_string)
        return self.resolve_model(model_string)

    async def aclose(self) -> None:
        """Release the HTTP clients of the model providers."""
        await self._registry.aclose()
