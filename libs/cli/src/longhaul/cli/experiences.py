"""``longhaul experiences …``: what your agents learned, and the markdown file that carries it
between deployments (``export`` writes it, ``import`` reads it back)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.listing import Format, Limit, Output, emit, emit_one, table_of
from longhaul.client import AsyncClient
from rich.markup import escape
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="List, show, export and import experiences.")

ExportFile = Annotated[
    Path | None, typer.Option("--output", "-o", help="write the file here (default: stdout)")
]


@app.command("ls")
def list_experiences(
    ctx: typer.Context,
    tag: Annotated[str | None, typer.Option(help="an intent or state tag")] = None,
    category: Annotated[str | None, typer.Option(help="tool_usage, logic_flow, …")] = None,
    text: Annotated[str | None, typer.Option("--text", "-q", help="text in the content")] = None,
    limit: Limit = 50,
    output: Output = Format.table,
) -> None:
    """Your experiences, newest first."""

    async def command(client: AsyncClient) -> None:
        page = await client.list_experiences(tag=tag, category=category, text=text, limit=limit)
        if not page.experiences and output is Format.table:
            console.print("no experiences yet: reflect on a trace to record some", style="dim")
            return

        def table() -> Table:
            columns = ("id", "category", "intent", "state", "+/-", "content")
            listed = table_of(columns, {"id": [item.id for item in page.experiences]})
            for item in page.experiences:
                listed.add_row(
                    item.id,
                    item.category,
                    ", ".join(item.tags.get("intent", [])),
                    ", ".join(item.tags.get("state", [])),
                    f"{item.metrics.get('helpful', 0)}/{item.metrics.get('harmful', 0)}",
                    escape(item.content.splitlines()[0][:80]),
                )
            return listed

        emit(page.experiences, output, table)
        if page.next_cursor and output is Format.table:
            console.print(f"more: --limit {limit * 2}", style="dim")

    execute(ctx, command)


@app.command("show")
def show(
    ctx: typer.Context,
    experience_id: Annotated[str, typer.Argument(help="ex_…")],
    output: Output = Format.table,
) -> None:
    """One experience with its tags, counters and source trace."""

    async def command(client: AsyncClient) -> None:
        item = await client.get_experience(experience_id)
        if emit_one(item, output):
            return
        console.print(f"[bold]{item.id}[/bold] ({item.category})")
        console.print(f"intent: {', '.join(item.tags.get('intent', [])) or '-'}")
        console.print(f"state:  {', '.join(item.tags.get('state', [])) or '-'}")
        helpful, harmful = item.metrics.get("helpful", 0), item.metrics.get("harmful", 0)
        console.print(f"helpful {helpful}, harmful {harmful}")
        console.print(f"from {item.trace_id or '-'} at {item.created_at.isoformat()}")
        console.print()
        console.print(escape(item.content))

    execute(ctx, command)


@app.command("export")
def export(ctx: typer.Context, output: ExportFile = None) -> None:
    """Write your experiences as one markdown file."""

    async def command(client: AsyncClient) -> None:
        text = await client.export_experiences()
        if output is None:
            sys.stdout.write(text)
        else:
            output.write_text(text, encoding="utf-8")
            console.print(f"wrote {output}", style="dim")

    execute(ctx, command)


@app.command("import")
def import_file(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="a markdown file")],
) -> None:
    """Read an exported (or hand-written) file back; the same ids are replaced."""

    async def command(client: AsyncClient) -> None:
        imported = await client.import_experiences(path.read_text(encoding="utf-8"))
        console.print(f"imported {imported.imported}: {', '.join(imported.ids)}")

    execute(ctx, command)
