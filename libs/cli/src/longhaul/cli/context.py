"""What every client command shares: where the gateway is, and how a command runs."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import typer
from longhaul.client import API_KEY_ENV, URL_ENV, ApiError, AsyncClient, LonghaulError, Unreachable
from rich.console import Console
from rich.markup import escape

console = Console(highlight=False)
errors = Console(stderr=True, highlight=False)


@dataclass(frozen=True)
class Target:
    url: str
    api_key: str | None


def explain(exc: LonghaulError) -> tuple[str, int]:
    """What to tell the user about ``exc``, and the exit code (1 refused or failed, 2 the
    gateway was not reachable)."""
    if isinstance(exc, Unreachable):
        return (
            f"{exc}. Start it with `longhaul up` (or `make run`), or point --url / {URL_ENV} "
            "at a running one.",
            2,
        )
    if isinstance(exc, ApiError) and exc.status == 401:
        return f"{exc} (set {API_KEY_ENV} or --api-key)", 1
    return str(exc), 1


def execute(ctx: typer.Context, command: Callable[[AsyncClient], Awaitable[int | None]]) -> None:
    """Run an async command against the gateway; errors become a message and an exit code
    (see :func:`explain`; 130 interrupted)."""
    target: Target = ctx.obj

    async def main() -> int | None:
        async with AsyncClient(target.url, target.api_key) as client:
            return await command(client)

    try:
        code = asyncio.run(main())
    except LonghaulError as exc:
        message, exit_code = explain(exc)
        errors.print(f"[red]error:[/red] {escape(message)}")
        raise typer.Exit(exit_code) from exc
    except KeyboardInterrupt:
        errors.print("interrupted; the trace keeps running on the server")
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)
