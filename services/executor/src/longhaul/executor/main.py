"""`longhaul-executor`: the executor service process."""

from __future__ import annotations

from longhaul.core.service import ServiceContext, run_main


async def run(ctx: ServiceContext) -> None:
    await ctx.shutdown.wait()


def main() -> None:
    run_main("executor", run)


if __name__ == "__main__":
    main()
