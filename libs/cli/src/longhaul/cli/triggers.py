"""``longhaul triggers …``: signed webhooks that start a run (``POST /api/triggers/{id}``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.listing import Format, Limit, Output, emit, emit_one, table_of
from longhaul.cli.render import clip
from longhaul.cli.schedules import run_template
from longhaul.client import AsyncClient
from longhaul.client.models import Trigger
from rich.markup import escape
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="Create, list and delete signed webhook triggers.")

TriggerId = Annotated[str, typer.Argument(help="trigger id (trg_…)")]


def _starts(trigger: Trigger) -> str:
    """What the trigger starts: its kind and first user message (or a task's goal)."""
    body = trigger.template.body
    first = next(
        (m.get("content") for m in body.get("messages", []) if m.get("role") == "user"), None
    )
    return f"{trigger.template.kind}: {first or body.get('goal') or '…'}"


def _table(triggers: list[Trigger]) -> Table:
    columns = ("id", "name", "starts", "url")
    table = table_of(columns, {"id": [t.trigger_id for t in triggers]})
    for trigger in triggers:
        table.add_row(
            trigger.trigger_id,
            escape(trigger.name),
            escape(clip(_starts(trigger), 60)),
            escape(trigger.url),
        )
    return table


@app.command("ls")
def list_triggers(ctx: typer.Context, limit: Limit = 100, output: Output = Format.table) -> None:
    """Your triggers (never their secrets)."""

    async def command(client: AsyncClient) -> None:
        triggers = (await client.list_triggers()).triggers[:limit]
        emit(triggers, output, lambda: _table(triggers))

    execute(ctx, command)


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="a name for listings")],
    prompt: Annotated[
        str | None,
        typer.Option(help="the run's user message; {{payload.field}} takes the request's JSON"),
    ] = None,
    template: Annotated[
        Path | None, typer.Option(help='a JSON file {"kind": "trace"|"task", "body": {…}}')
    ] = None,
    model: Annotated[str | None, typer.Option(help="with --prompt: the model string")] = None,
    output: Output = Format.table,
) -> None:
    """Create a trigger from --prompt (a trace) or --template; prints its secret, only now."""
    body = run_template(prompt, template, model)

    async def command(client: AsyncClient) -> None:
        created = await client.create_trigger(name, body)
        if emit_one(created, output):
            return
        console.print(f"{created.trigger_id}  POST {created.url}", soft_wrap=True)
        console.print(f"secret (shown only now): {created.secret}", soft_wrap=True)

    execute(ctx, command)


@app.command("delete")
def delete(ctx: typer.Context, trigger_id: TriggerId) -> None:
    """Delete a trigger (the runs it started stay)."""

    async def command(client: AsyncClient) -> None:
        await client.delete_trigger(trigger_id)
        console.print(f"{trigger_id} deleted")

    execute(ctx, command)
