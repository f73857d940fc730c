"""`longhaul-planner`: decomposes tasks into phases and runs them as step traces."""

from __future__ import annotations

from longhaul.agent.config_check import check_config
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.tools.builtin import builtin_tools
from longhaul.core.consumer import consume
from longhaul.core.service import ServiceContext, run_main
from longhaul.llm.registry import ModelRegistry
from longhaul.planner.driver import PlannerDeps, TaskDriver
from longhaul.planner.models import PlannerModels
from longhaul.planner.service import Planner, consumer_spec


def planner_deps(ctx: ServiceContext, registry: ModelRegistry) -> PlannerDeps:
    config = ctx.config
    return PlannerDeps(
        conn=ctx.conn,
        traces=ctx.traces,
        tasks=ctx.tasks,
        workspace=ctx.workspace,
        checkpoints=ctx.checkpoints,
        models=PlannerModels(registry, config.models),
        pipeline=config.pipeline,
        presets=PresetCatalog(config.presets).names(),
        tools=builtin_tools().names(),
    )


async def run(ctx: ServiceContext) -> None:
    async with ModelRegistry(ctx.config.models) as registry:
        planner = Planner(ctx.conn, TaskDriver(planner_deps(ctx, registry)))
        await consume(ctx.conn, consumer_spec(ctx.conn), planner.handle, ctx.shutdown)


def main() -> None:
    run_main("planner", run, check=check_config)


if __name__ == "__main__":
    main()
