"""``longhaul tasks …``: inspect planned tasks and answer a plan waiting for review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from longhaul.cli.client import Gateway
from longhaul.cli.context import console, execute
from longhaul.cli.render import clip, status_text
from rich.markup import escape
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="Inspect tasks and review their plans.")

TaskId = Annotated[str, typer.Argument(help="task id (task_…)")]


def phases_table(phases: list[dict[str, Any]]) -> Table:
    table = Table(show_edge=False)
    for column in ("phase", "name", "after", "preset", "status", "summary"):
        table.add_column(column)
    for phase in phases:
        table.add_row(
            phase["id"],
            escape(phase["name"]),
            ", ".join(phase["depends_on"]) or "-",
            phase.get("preset") or "",
            status_text(phase["status"]),
            escape(clip(phase.get("summary") or phase.get("error") or "", 60)),
        )
    return table


@app.command("show")
def show(ctx: typer.Context, task_id: TaskId) -> None:
    """Status and phases of a task (and how to review a plan waiting for it)."""

    async def command(gateway: Gateway) -> None:
        task = await gateway.get(f"/api/tasks/{task_id}")
        console.print(f"[bold]{task_id}[/bold] ", status_text(task["status"]))
        console.print(f"goal: {escape(task['goal'])}")
        if task["phases"]:
            console.print(f"plan ({task.get('plan_source') or '?'}):")
            console.print(phases_table(task["phases"]))
        for label in ("summary", "error"):
            if task.get(label):
                console.print(f"{label}: {escape(task[label])}")
        if task["status"] == "awaiting_review":
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
    body: dict[str, Any]
    if refuse is not None:
        body = {"approved": False, "reason": refuse}
    else:
        body = {"approved": True, "reason": reason}
        if edit is not None:
            body["phases"] = _edited_phases(edit)

    async def command(gateway: Gateway) -> None:
        answer = await gateway.post(f"/api/tasks/{task_id}/plan", body)
        console.print(f"{task_id} ", status_text(answer["status"]))

    execute(ctx, command)
