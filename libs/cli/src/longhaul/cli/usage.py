"""``longhaul usage``: what was spent, by key, model, preset and UTC day (``GET /api/usage``;
a key sees its own, the operator's key every key's); ``longhaul inbox budget`` answers a run
waiting at a spend limit."""

from __future__ import annotations

from typing import Annotated

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.listing import Format, Output, emit_records, table_of
from longhaul.client import AsyncClient
from longhaul.client.models import Usage, UsageRow
from rich.markup import escape
from rich.table import Table

GroupBy = Annotated[
    str,
    typer.Option("--by", "-b", help="comma-separated: key, model, preset, day (none: a total)"),
]
SinceDay = Annotated[
    str | None, typer.Option("--since", help="first UTC day counted: YYYY-MM-DD (default: all)")
]
TraceId = Annotated[str, typer.Argument(help="trace id (t_…) waiting on a budget")]


def usage_table(spent: Usage) -> Table:
    """One row per group, most spent first, then the total (ids never cut)."""
    groups = [g for g in ("day", "key", "model", "preset") if g in spent.group_by]
    table = table_of(groups, {"key": [row.key or "" for row in spent.rows]})
    for figure in ("calls", "tokens", "usd"):
        table.add_column(figure, justify="right")
    for row in spent.rows:
        labels = [escape(getattr(row, group) or "") for group in groups]
        table.add_row(*labels, *_figures(row))
    table.add_section()
    labels = ["total", *[""] * (len(groups) - 1)] if groups else []
    table.add_row(*labels, *_figures(spent.total), style="bold")
    return table


def _figures(row: UsageRow) -> list[str]:
    return [f"{row.calls:,}", f"{row.tokens:,}", f"{row.usd:,.4f}"]


def usage(
    ctx: typer.Context,
    by: GroupBy = "day,model",
    since: SinceDay = None,
    output: Output = Format.table,
) -> None:
    """What was spent (calls, tokens, dollars), most first, then the total; days are UTC."""

    async def command(client: AsyncClient) -> None:
        spent = await client.usage(group_by=by, since=since)
        if emit_records(spent.rows, output):
            return
        if not spent.rows:
            console.print("nothing spent", style="dim")
            return
        console.print(usage_table(spent))

    execute(ctx, command)


def answer_line(trace_id: str | None) -> str:
    """The command that answers a run waiting at a spend limit."""
    return f"longhaul inbox budget {trace_id} --raise-usd N|--raise-tokens N|--stop"


def budgets(ctx: typer.Context, output: Output = Format.table) -> None:
    """Runs waiting at a spend limit, oldest first (the operator's key: every key's), then the
    command that answers each."""

    async def command(client: AsyncClient) -> None:
        waits = (await client.budget_waits()).items
        if emit_records(waits, output):
            return
        if not waits:
            console.print("no run waits at a spend limit", style="dim")
            return
        table = table_of(("run", "key", "name", "limit"), {"run": [w.trace_id for w in waits]})
        for wait in waits:
            table.add_row(
                wait.trace_id, wait.key or "", escape(wait.name or ""), escape(wait.detail)
            )
        console.print(table)
        console.print("answer with:", style="dim")
        for wait in waits:
            console.print(f"  {answer_line(wait.trace_id)}", soft_wrap=True)

    execute(ctx, command)


def budget(
    ctx: typer.Context,
    trace_id: TraceId,
    raise_usd: Annotated[
        float, typer.Option("--raise-usd", min=0, help="dollars more for this run")
    ] = 0.0,
    raise_tokens: Annotated[
        int, typer.Option("--raise-tokens", min=0, help="tokens more for this run")
    ] = 0,
    stop: Annotated[bool, typer.Option("--stop", help="stop the run instead")] = False,
) -> None:
    """Answer a run waiting at a spend limit: raise its limit for this run, or stop it (the
    operator's key; a key its own runs only with spend_limits.keys_answer)."""
    if stop == bool(raise_usd or raise_tokens):
        raise typer.BadParameter("give --raise-usd and/or --raise-tokens, or --stop")

    async def command(client: AsyncClient) -> None:
        action = "stop" if stop else "raise"
        answered = await client.answer_budget(trace_id, action, usd=raise_usd, tokens=raise_tokens)
        console.print(
            f"budget: {action} accepted (trace {trace_id} is {answered.status}; raised in all "
            f"${answered.raised_usd:g}, {answered.raised_tokens:,} tokens)"
        )

    execute(ctx, command)
