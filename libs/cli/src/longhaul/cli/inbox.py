"""``longhaul inbox``: what waits for you across your runs, and answering it in place.

The answers are the trace commands themselves (``reply``, ``approve [--arguments]``,
``deny --reason``; a plan is reviewed with ``longhaul tasks plan``), registered here again so
the inbox reads as one place to work from.
"""

from __future__ import annotations

import datetime
import json

import typer
from longhaul.cli import traces, usage
from longhaul.cli.context import console, execute
from longhaul.cli.listing import Format, Limit, Output, Since, emit, since_ts, table_of
from longhaul.cli.render import clip
from longhaul.client import AsyncClient
from longhaul.client.models import InboxItem
from rich.markup import escape
from rich.table import Table

app = typer.Typer(
    help="What waits for you: questions, approvals, budget limits, plan reviews; answer them."
)


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.datetime.fromtimestamp(ts).strftime("%m-%d %H:%M:%S")


def _what(item: InboxItem) -> str:
    if item.kind in ("question", "budget"):
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
    if item.kind == "budget":
        return usage.answer_line(item.trace_id)
    return f"longhaul tasks plan {item.task_id} --approve"


def inbox_table(items: list[InboxItem]) -> Table:
    runs = [item.trace_id or item.task_id or "" for item in items]
    columns = ("since", "kind", "run", "name", "waiting for", "deadline")
    table = table_of(columns, {"run": runs})
    for item, run in zip(items, runs, strict=True):
        deadline = _when(item.deadline)
        if item.on_deadline:
            deadline += f" ({item.on_deadline})"
        table.add_row(
            _when(item.since),
            item.kind,
            run,
            escape(item.name or ""),
            escape(clip(_what(item), 80)),
            deadline,
        )
    return table


@app.callback(invoke_without_command=True)
def inbox(ctx: typer.Context, output: Output = Format.table) -> None:
    """Without a command: the list (``longhaul inbox ls``)."""
    if ctx.invoked_subcommand is None:
        list_inbox(ctx, output=output)


@app.command("ls")
def list_inbox(
    ctx: typer.Context,
    limit: Limit = 100,
    since: Since = None,
    output: Output = Format.table,
) -> None:
    """Every question, approval and plan review waiting for you, oldest first, then the
    commands that answer them (one a line, never cut, to copy)."""
    floor = since_ts(since)

    async def command(client: AsyncClient) -> None:
        items = [
            item for item in (await client.inbox()).items if floor is None or item.since >= floor
        ][:limit]
        if not items and output is Format.table:
            console.print("nothing waits for you", style="dim")
            return
        emit(items, output, lambda: inbox_table(items))
        if output is Format.table:
            console.print("answer with:", style="dim")
            for item in items:
                console.print(f"  {escape(_answer(item))}", soft_wrap=True)

    execute(ctx, command)


app.command("reply")(traces.reply)
app.command("approve")(traces.approve)
app.command("deny")(traces.deny)
app.command("budget")(usage.budget)
app.command("budgets")(usage.budgets)
