"""`longhaul-gateway`: the HTTP ingress process."""

from __future__ import annotations

from longhaul.core.service import ServiceContext, run_main


async def run(ctx: ServiceContext) -> None:
    await ctx.shutdown.wait()


def main() -> None:
    run_main("gateway", run)


if __name__ == "__main__":
    main()
