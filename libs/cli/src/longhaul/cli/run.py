"""``longhaul run "goal"``: submit a goal through ``POST /api/runs`` (the gateway routes it
to one agent or a planned team) and stream it to the end."""

from __future__ import annotations

from pathlib import Path

import typer
from longhaul.cli.context import console, errors
from longhaul.cli.follow import Follower
from longhaul.cli.render import clip
from longhaul.cli.tasks import phases_table
from longhaul.client import AsyncClient
from rich.markup import escape

TASK_ENDS = {"task_completed": 0, "task_failed": 1}


def read_files(paths: list[Path]) -> dict[str, bytes]:
    """``--file`` paths as name → bytes, named by their last part (two with one name: an
    error, one would hide the other)."""
    files: dict[str, bytes] = {}
    for path in paths:
        if path.name in files:
            raise typer.BadParameter(f"two files are named {path.name}", param_hint="--file")
        files[path.name] = path.read_bytes()
    return files


async def run_task(
    client: AsyncClient,
    task: str,
    *,
    mode: str,
    model: str | None,
    preset: str | None,
    tools: list[str] | None,
    name: str | None,
    max_iterations: int | None,
    review: bool | None,
    follow: bool,
    files: dict[str, bytes] | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
) -> int:
    info = await client.info()
    if info.offline and model is None and info.notice:
        errors.print(f"[yellow]note:[/yellow] {escape(info.notice)}")
    accepted = await client.start(
        task,
        mode=mode,
        model=model,
        preset=preset,
        tools=tools,
        name=name,
        max_iterations=max_iterations,
        max_tokens=max_tokens,
        max_cost=max_cost,
        review=review,
        files=files,
    )
    route = accepted.route
    console.print(
        f"route: {route.tier} (complexity {route.complexity:.2f}, {route.source}): "
        f"{escape(clip(route.reason, 120))}",
        style="dim",
    )
    if accepted.task_id is not None:
        return await _follow_task(client, accepted.task_id, follow)
    assert accepted.trace_id is not None, "a run is a trace or a task"
    trace_id = accepted.trace_id
    console.print(f"trace [bold]{trace_id}[/bold] · model {escape(model or info.default_model)}")
    if not follow:
        console.print(f"follow it with: longhaul traces watch {trace_id}", style="dim")
        return 0
    follower = Follower(client, console)
    status = await follower.follow(trace_id)
    return await follower.conclude(trace_id, status)


async def _follow_task(client: AsyncClient, task_id: str, follow: bool) -> int:
    """Print the task's progress until it ends (or waits for a review)."""
    console.print(f"task [bold]{task_id}[/bold] (a planned team)")
    if not follow:
        console.print(f"see it with: longhaul tasks show {task_id}", style="dim")
        return 0
    async for item in client.task_events(task_id):
        data = item.data
        if item.event == "plan_created":
            console.print(f"plan ({data.get('source', '?')}): {len(data['phases'])} phases")
            if data.get("review"):
                task = await client.get_task(task_id)
                console.print(phases_table(task.phases))
                console.print(
                    f"waiting for review: longhaul tasks plan {task_id} --approve | "
                    "--edit plan.json | --refuse REASON",
                    style="yellow",
                )
                return 0
        elif item.event in ("phase_started", "phase_completed", "phase_failed"):
            detail = data.get("summary") or data.get("error") or ""
            console.print(f"{item.event} {data['phase_id']} {escape(clip(detail, 80))}")
        elif item.event == "replanned":
            console.print(f"replanned: {escape(clip(data['reflection'], 100))}", style="yellow")
        elif item.event in TASK_ENDS:
            console.print(f"{item.event}: {escape(data.get('summary') or data.get('error', ''))}")
            return TASK_ENDS[item.event]
        elif item.event == "plan_reviewed" and not data.get("approved"):
            console.print(f"plan refused: {escape(data.get('reason', ''))}")
            return 1
    return 1
