"""``longhaul schedules …``: runs that start themselves (cron, interval, once) and their runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.listing import Format, Limit, Output, emit, emit_one, table_of
from longhaul.cli.render import status_text
from longhaul.client import AsyncClient
from longhaul.client.models import Schedule
from rich.markup import escape
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="Create, list, pause and run schedules.")

ScheduleId = Annotated[str, typer.Argument(help="schedule id (sched_…)")]


def _when(schedule: Schedule) -> str:
    if schedule.cron:
        return f"cron {schedule.cron} ({schedule.timezone})"
    if schedule.every_s:
        return f"every {schedule.every_s:g}s"
    return f"at {schedule.at}"


def _row(table: Table, schedule: Schedule) -> None:
    table.add_row(
        schedule.schedule_id,
        escape(schedule.name),
        escape(_when(schedule)),
        "paused" if schedule.paused else (schedule.next_run_at or "-"),
        f"{schedule.overlap}/{schedule.catch_up}",
        str(schedule.runs_started),
    )


def _table(schedules: list[Schedule]) -> Table:
    columns = ("id", "name", "when", "next", "overlap/catch-up", "runs")
    table = table_of(columns, {"id": [s.schedule_id for s in schedules]})
    for schedule in schedules:
        _row(table, schedule)
    return table


@app.command("ls")
def list_schedules(
    ctx: typer.Context,
    paused: Annotated[
        bool | None, typer.Option("--paused/--active", help="only paused or only active ones")
    ] = None,
    limit: Limit = 100,
    output: Output = Format.table,
) -> None:
    """Your schedules, newest first."""

    async def command(client: AsyncClient) -> None:
        schedules = [
            schedule
            for schedule in (await client.list_schedules()).schedules
            if paused is None or schedule.paused == paused
        ][:limit]
        emit(schedules, output, lambda: _table(schedules))

    execute(ctx, command)


def run_template(prompt: str | None, template: Path | None, model: str | None) -> dict[str, Any]:
    """What a schedule or trigger starts: a trace from ``prompt`` or ``template``'s body."""
    if (prompt is None) == (template is None):
        raise typer.BadParameter("give exactly one of --prompt or --template")
    if template is not None:
        try:
            value = json.loads(template.read_text())
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(
                f"cannot read a JSON template from {template}: {exc}"
            ) from None
        if not isinstance(value, dict):
            raise typer.BadParameter('expected {"kind": "trace"|"task", "body": {…}}')
        return value
    trace: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}]}
    if model:
        trace["model"] = model
    return {"kind": "trace", "body": trace}


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="a name for listings")],
    prompt: Annotated[str | None, typer.Option(help="the run's user message (a trace)")] = None,
    template: Annotated[
        Path | None, typer.Option(help='a JSON file {"kind": "trace"|"task", "body": {…}}')
    ] = None,
    model: Annotated[str | None, typer.Option(help="with --prompt: the model string")] = None,
    cron: Annotated[str | None, typer.Option(help='5 fields, e.g. "0 9 * * 1-5"')] = None,
    timezone: Annotated[str | None, typer.Option(help="IANA zone for --cron")] = None,
    every: Annotated[float | None, typer.Option("--every", help="interval in seconds")] = None,
    at: Annotated[str | None, typer.Option(help="one run at an RFC 3339 time")] = None,
    overlap: Annotated[str | None, typer.Option(help="skip | queue | allow")] = None,
    catch_up: Annotated[str | None, typer.Option(help="none | latest | all")] = None,
    paused: Annotated[bool, typer.Option(help="create it paused")] = False,
) -> None:
    """Create a schedule from --prompt (a trace) or --template (any trace or task body)."""
    body = run_template(prompt, template, model)

    async def command(client: AsyncClient) -> None:
        schedule = await client.create_schedule(
            name,
            body,
            cron=cron,
            timezone=timezone,
            every_s=every,
            at=at,
            overlap=overlap,
            catch_up=catch_up,
            paused=paused or None,
        )
        console.print(f"{schedule.schedule_id}  next: {schedule.next_run_at or '-'}")

    execute(ctx, command)


@app.command("show")
def show(ctx: typer.Context, schedule_id: ScheduleId, output: Output = Format.table) -> None:
    """A schedule and the runs it started, newest first."""

    async def command(client: AsyncClient) -> None:
        schedule = await client.get_schedule(schedule_id)
        started = (await client.schedule_runs(schedule_id)).runs
        runs_json = [run.model_dump(mode="json") for run in started]
        if emit_one({**schedule.model_dump(mode="json"), "runs": runs_json}, output):
            return
        console.print(_table([schedule]))
        if schedule.last_error:
            console.print(f"last error: {escape(schedule.last_error)}", style="red")
        runs = table_of(("run", "tick", "status"), {"run": [r.run_id for r in started]})
        for run in started:
            tick = run.tick + (" (run now)" if run.manual else "")
            runs.add_row(run.run_id, tick, status_text(run.status or "?"))
        console.print(runs)

    execute(ctx, command)


def _set_paused(ctx: typer.Context, schedule_id: str, paused: bool) -> None:
    async def command(client: AsyncClient) -> None:
        schedule = await client.update_schedule(schedule_id, paused=paused)
        state = "paused" if schedule.paused else f"next: {schedule.next_run_at or '-'}"
        console.print(f"{schedule_id}  {state}")

    execute(ctx, command)


@app.command("pause")
def pause(ctx: typer.Context, schedule_id: ScheduleId) -> None:
    """Start no run until resumed."""
    _set_paused(ctx, schedule_id, True)


@app.command("resume")
def resume(ctx: typer.Context, schedule_id: ScheduleId) -> None:
    """Tick again from now on (the ticks missed while paused are not run)."""
    _set_paused(ctx, schedule_id, False)


@app.command("run")
def run_now(ctx: typer.Context, schedule_id: ScheduleId) -> None:
    """Start the schedule's run now, outside its timing."""

    async def command(client: AsyncClient) -> None:
        started = await client.run_schedule(schedule_id)
        console.print(started.run_id)

    execute(ctx, command)


@app.command("rm")
def remove(ctx: typer.Context, schedule_id: ScheduleId) -> None:
    """Delete a schedule (the runs it started stay)."""

    async def command(client: AsyncClient) -> None:
        await client.delete_schedule(schedule_id)
        console.print(f"{schedule_id} deleted")

    execute(ctx, command)
