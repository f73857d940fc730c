"""What every client command shares: where the gateway is, and how a command runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import typer
from longhaul.cli.client import Gateway, GatewayError
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False)
errors = Console(stderr=True, highlight=False)


@dataclass(frozen=True)
class Target:
    url: str
    api_key: str | None


def execute(ctx: typer.Context, command: Callable[[Gateway], Awaitable[int | None]]) -> None:
    """Run an async command against the gateway; errors become a message and an exit code
    (1 refused or failed, 2 gateway unreachable, 130 interrupted)."""
    target: Target = ctx.obj

    async def main() -> int | None:
        async with Gateway(target.url, target.api_key) as gateway:
            return await command(gateway)

    try:
        code = asyncio.run(main())
    except GatewayError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(exc.exit_code) from exc
    except KeyboardInterrupt:
        errors.print("interrupted; the trace keeps running on the server")
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)
