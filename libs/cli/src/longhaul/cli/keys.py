"""``longhaul keys …``: the operator's commands over one API key's data (run them with one
of ``gateway.admin_keys`` as ``--api-key`` / ``LONGHAUL_API_KEY``)."""

from __future__ import annotations

from typing import Annotated

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.listing import Format, Output, emit, table_of
from longhaul.cli.render import Yes, erased
from longhaul.client import AsyncClient
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="The operator's commands over an API key's data.")


@app.command("ls")
def list_keys(
    ctx: typer.Context,
    revoked: Annotated[bool, typer.Option("--revoked", help="only the revoked keys")] = False,
    output: Output = Format.table,
) -> None:
    """Every key with what it holds; a revoked one (removed from gateway.api_keys) is listed
    while anything of it is left, to erase (``longhaul keys erase``) or hand back."""

    async def command(client: AsyncClient) -> None:
        held_keys = [k for k in (await client.list_keys()).keys if not (revoked and k.configured)]

        def table() -> Table:
            columns = ("owner", "key", "traces", "active", "tasks", "schedules", "triggers")
            listed = table_of(columns, {"owner": [k.owner for k in held_keys]})
            for held in held_keys:
                listed.add_row(
                    held.owner,
                    "configured" if held.configured else "[red]revoked[/red]",
                    str(held.traces),
                    str(held.active_traces),
                    str(held.tasks),
                    f"{held.schedules} ({held.paused_schedules} paused)",
                    str(held.triggers),
                )
            return listed

        emit(held_keys, output, table)

    execute(ctx, command)


@app.command("erase")
def erase(
    ctx: typer.Context,
    owner: Annotated[str, typer.Argument(help="the key's owner id (k_…, from /api/info)")],
    yes: Yes = False,
) -> None:
    """Erase every trace, task, experience, upload and image of one API key."""
    if not yes:
        typer.confirm(f"erase everything key {owner} ever stored, for good?", abort=True)

    async def command(client: AsyncClient) -> None:
        report = await client.erase_key(owner)
        console.print(erased(report))
        if report.skipped:
            console.print(f"left, still running: {', '.join(report.skipped)}", style="yellow")

    execute(ctx, command)
