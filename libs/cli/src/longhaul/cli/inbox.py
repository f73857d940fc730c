"""``longhaul inbox``: what waits for you across your runs, and answering it in place.

The answers are the trace commands themselves (``reply``, ``approve [--arguments]``,
``deny --reason``; a plan is reviewed with ``longhaul tasks plan``), registered here again so
the inbox reads as one place to work from.
"""

from __future__ import annotations

import datetime
import json

import typer
from longhaul.cli import traces
from longhaul.cli.context import console, execute
from longhaul.cli.render import clip
from longhaul.client import AsyncClient
from longhaul.client.models import InboxItem
from rich.markup import escape
from rich.table import Table

app = typer.Typer(help="What waits for you: questions, approvals, plan reviews; answer them.")


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%m-%d %H:%M:%S")


def _what(item: InboxItem) -> str:
    if item.kind == "question":
        return item.question or ""
    if item.kind == "approval":
        arguments = json.dumps(item.arguments, ensure_ascii=False)
        return f"{item.tool}({arguments})"
    return f"{item.goal}: {len(item.phases or [])} phase(s)"


def _answer(item: InboxItem) -> str:
    if item.kind == "question":
        return f"longhaul inbox reply {item.trace_id} TEXT"
    if item.kind == "approval":
        return f"longhaul inbox approve|deny {item.trace_id} {item.tool_call_id}"
    return f"longhaul tasks plan {item.task_id} --approve"


def inbox_table(items: list[InboxItem]) -> Table:
    table = Table(show_edge=False)
    for column in ("since", "kind", "run", "waiting for", "deadline", "answer with"):
        table.add_column(column)
    for item in items:
        deadline = _when(item.deadline)
        if item.on_deadline:
            deadline += f" ({item.on_deadline})"
        table.add_row(
            _when(item.since),
            item.kind,
            escape(item.name or item.trace_id or item.task_id or ""),
            escape(clip(_what(item), 80)),
            deadline,
            f"[dim]{escape(_answer(item))}[/dim]",
        )
    return table


@app.callback(invoke_without_command=True)
def inbox(ctx: typer.Context) -> None:
    """Without a command: the list (``longhaul inbox ls``)."""
    if ctx.invoked_subcommand is None:
        list_inbox(ctx)


@app.command("ls")
def list_inbox(ctx: typer.Context) -> None:
    """Every question, approval and plan review waiting for you, oldest first."""

    async def command(client: AsyncClient) -> None:
        inbox = await client.inbox()
        if not inbox.items:
            console.print("nothing waits for you", style="dim")
            return
        console.print(inbox_table(inbox.items))

    execute(ctx, command)


app.command("reply")(traces.reply)
app.command("approve")(traces.approve)
app.command("deny")(traces.deny)
