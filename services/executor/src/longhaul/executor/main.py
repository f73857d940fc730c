"""`longhaul-executor` / `python -m longhaul.executor.main`: the executor service process.

Configuration: the shared ``LONGHAUL_*`` settings (``LONGHAUL_NATS__URL``,
``LONGHAUL_NATS__NAMESPACE``, ``LONGHAUL_STORE__LEASE_TTL_S`` …), the executor's own
``LONGHAUL_EXECUTOR__*`` settings (see ``settings.py``: ``CONCURRENCY``, ``TOOL_MODULES``,
``METRICS_PORT``, ``WORKING_ROOT`` …) and ``LONGHAUL_EXECUTOR_ID`` (default hostname-pid).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from longhaul.agent.config_check import check_config
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.tools import ToolRegistry
from longhaul.core.config import LonghaulConfig
from longhaul.core.service import ServiceContext, run_main
from longhaul.core.spend import SpendLedger
from longhaul.executor.agent_turns import AgentTurns, ModelResolver
from longhaul.executor.budgets import ancestor_over_budget
from longhaul.executor.circuits import KvBreaker
from longhaul.executor.cost_metrics import CostCounters, known_models
from longhaul.executor.executor import Executor
from longhaul.executor.messenger import LogMessenger
from longhaul.executor.metrics import ExecutorMetrics
from longhaul.executor.remote import RemoteAgents
from longhaul.executor.replay import Recordings
from longhaul.executor.settings import ExecutorSettings
from longhaul.executor.tools import ExecutorTools, check_tools, load_tools, tool_on_unknown
from longhaul.executor.workspace import KvWorkspace


def build_executor(
    ctx: ServiceContext,
    settings: ExecutorSettings,
    *,
    tools: ToolRegistry | None = None,
    resolve_model: ModelResolver | None = None,
) -> Executor:
    """An executor on ``ctx``; ``tools``/``resolve_model`` replace the configured ones
    (in-process benchmarks)."""
    registry = tools if tools is not None else load_tools(settings.tool_modules, ctx.config.tools)
    working_root = settings.working_root or ctx.config.working_root or Path.cwd()
    remote = RemoteAgents(ctx.config.remote_agents)  # the executor closes it
    metrics = ExecutorMetrics()
    presets = PresetCatalog(ctx.config.presets).names()
    cost = CostCounters(metrics.registry, known_models(ctx.config), presets)
    agent = AgentTurns(
        ctx.config,
        registry,
        workspace=KvWorkspace(ctx.workspace),
        working_root=working_root,
        resolve_model=resolve_model,
        ancestor_budget=partial(ancestor_over_budget, ctx.traces),
        storage_full=ctx.storage.full,
        messenger=LogMessenger(
            ctx.traces, ctx.tasks, actor=f"executor:{settings.id}", remote=remote
        ),
        experiences=ctx.experiences,
        recordings=Recordings(ctx.traces),
        breaker=KvBreaker(ctx.conn, ctx.config.models.circuit),
        spend=SpendLedger(ctx.conn, ctx.config.spend_limits, on_counted=cost.charge),
    )
    offered = ExecutorTools(
        ctx.workspace,
        settings.id,
        registry,
        ctx.config.tools,
        working_root=working_root,
        sandbox=ctx.config.sandbox,
    )
    return Executor(
        ctx, settings, agent, offered, remote, working_root=working_root, metrics=metrics
    )


async def run(ctx: ServiceContext) -> None:
    await build_executor(ctx, ExecutorSettings()).run()


def check_executor_config(config: LonghaulConfig) -> None:
    check_config(config)
    check_tools(config.tools, os.environ)
    # A module that cannot be imported stops the executor here, with its name and the error.
    offered = load_tools(ExecutorSettings().tool_modules, config.tools)
    if config.tools.on_unknown:  # its names are the offered tools': a misspelt one stops here
        tool_on_unknown(config.tools, offered)


def main() -> None:
    run_main("executor", run, check=check_executor_config)


if __name__ == "__main__":
    main()
