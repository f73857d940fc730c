"""``longhaul tasks …``: inspect planned tasks and answer a plan waiting for review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.listing import (
    Format,
    Limit,
    Output,
    Since,
    Statuses,
    emit,
    emit_one,
    since_ts,
    table_of,
)
from longhaul.cli.render import Yes, ago, clip, erased, status_text
from longhaul.client import AsyncClient
from longhaul.client.models import Phase, TaskSummary
from rich.markup import escape
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="Inspect tasks and review their plans.")

TaskId = Annotated[str, typer.Argument(help="task id (task_…)")]


def phases_table(phases: list[Phase]) -> Table:
    columns = ("phase", "name", "after", "preset", "status", "summary")
    table = table_of(columns, {"phase": [p.id for p in phases]})
    for phase in phases:
        table.add_row(
            phase.id,
            escape(phase.name),
            ", ".join(phase.depends_on) or "-",
            phase.preset,
            status_text(phase.status),
            escape(clip(phase.summary or phase.error, 60)),
        )
    return table


TASK_PAGE = 100  # the gateway's largest
MAX_TASK_PAGES = 100


@app.command("ls")
def list_tasks(
    ctx: typer.Context,
    status: Statuses = None,
    since: Since = None,
    limit: Limit = 50,
    output: Output = Format.table,
) -> None:
    """Your tasks, newest first by start time."""
    floor = since_ts(since)

    async def command(client: AsyncClient) -> None:
        found: list[TaskSummary] = []
        cursor: str | None = None
        for _ in range(MAX_TASK_PAGES):
            page = await client.list_tasks(limit=TASK_PAGE, cursor=cursor)
            found.extend(
                task
                for task in page.tasks
                if (not status or task.status in status)
                and (floor is None or task.created_at >= floor)
            )
            cursor = page.next_cursor
            if cursor is None:
                break
        found.sort(key=lambda task: task.created_at, reverse=True)
        shown = found[:limit]

        def table() -> Table:
            columns = ("task", "status", "goal", "phases", "started")
            listed = table_of(columns, {"task": [t.task_id for t in shown]})
            for task in shown:
                listed.add_row(
                    task.task_id,
                    status_text(task.status),
                    escape(clip(task.goal, 80)),
                    f"{task.phases_completed}/{task.phases}",
                    ago(task.created_at),
                )
            return listed

        emit(shown, output, table)

    execute(ctx, command)


@app.command("show")
def show(ctx: typer.Context, task_id: TaskId, output: Output = Format.table) -> None:
    """Status and phases of a task (and how to review a plan waiting for it)."""

    async def command(client: AsyncClient) -> None:
        task = await client.get_task(task_id)
        if emit_one(task, output):
            return
        console.print(f"[bold]{task_id}[/bold] ", status_text(task.status))
        console.print(f"goal: {escape(task.goal)}")
        if task.phases:
            console.print(f"plan ({task.plan_source or '?'}):")
            console.print(phases_table(task.phases))
        for label, value in (("summary", task.summary), ("error", task.error)):
            if value:
                console.print(f"{label}: {escape(value)}")
        if task.status == "awaiting_review":
            console.print(
                f"review it: longhaul tasks plan {task_id} --approve | --edit plan.json | "
                "--refuse REASON",
                style="yellow",
            )

    execute(ctx, command)


def _edited_phases(path: Path) -> list[Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read a JSON plan from {path}: {exc}") from None
    phases = value.get("phases") if isinstance(value, dict) else value
    if not isinstance(phases, list):
        raise typer.BadParameter('expected a list of phases or {"phases": [...]}')
    return phases


@app.command("plan")
def plan(
    ctx: typer.Context,
    task_id: TaskId,
    approve: Annotated[bool, typer.Option("--approve", help="run the plan as proposed")] = False,
    edit: Annotated[
        Path | None,
        typer.Option(help='run this plan instead: a JSON list of phases or {"phases": [...]}'),
    ] = None,
    refuse: Annotated[
        str | None, typer.Option(help="refuse the plan (the task is cancelled) with a reason")
    ] = None,
    reason: Annotated[str, typer.Option(help="a note kept with an approval")] = "",
) -> None:
    """Answer a plan waiting for review: approve it, approve an edited one, or refuse it."""
    if sum((approve, edit is not None, refuse is not None)) != 1:
        raise typer.BadParameter("give exactly one of --approve, --edit FILE, --refuse REASON")
    phases = _edited_phases(edit) if edit is not None else None

    async def command(client: AsyncClient) -> None:
        if refuse is not None:
            answer = await client.review_plan(task_id, approved=False, reason=refuse)
        else:
            answer = await client.review_plan(task_id, approved=True, phases=phases, reason=reason)
        console.print(f"{task_id} ", status_text(answer.status))

    execute(ctx, command)


@app.command("delete")
def delete(ctx: typer.Context, task_id: TaskId, yes: Yes = False) -> None:
    """Delete an ended task with its step traces everywhere they are stored."""
    if not yes:
        typer.confirm(f"erase task {task_id} and its step traces for good?", abort=True)

    async def command(client: AsyncClient) -> None:
        console.print(erased(await client.delete_task(task_id)))

    execute(ctx, command)


@app.command("checkpoints")
def checkpoints(
    ctx: typer.Context,
    task_id: TaskId,
    clear: Annotated[
        bool, typer.Option("--clear", help="remove them (a resume then reads the event log)")
    ] = False,
) -> None:
    """The saved phase results a resume starts from; --clear removes them."""

    async def command(client: AsyncClient) -> None:
        if clear:
            answer = await client.clear_task_checkpoints(task_id)
            console.print(f"cleared {answer.cleared} checkpoints of {task_id}")
            return
        saved = (await client.task_checkpoints(task_id)).checkpoints
        if not saved:
            console.print("no checkpoints", style="dim")
        for item in saved:
            console.print(
                f"{item.phase_id}  {escape(item.name)}  [dim]{escape(clip(item.summary, 80))}[/dim]"
            )

    execute(ctx, command)
