"""``longhaul run "task"``: submit a trace and stream it to the end."""

from __future__ import annotations

from typing import Any

from longhaul.cli.client import Gateway
from longhaul.cli.context import console, errors
from longhaul.cli.follow import Follower
from rich.markup import escape


async def run_task(
    gateway: Gateway,
    task: str,
    *,
    model: str | None,
    preset: str | None,
    tools: list[str] | None,
    name: str | None,
    max_iterations: int | None,
    follow: bool,
) -> int:
    info = await gateway.get("/api/info")
    if info.get("offline") and model is None:
        errors.print(f"[yellow]note:[/yellow] {escape(info['notice'])}")
    body: dict[str, Any] = {"messages": [{"role": "user", "content": task}]}
    for key, value in (
        ("model", model),
        ("preset", preset),
        ("tools", tools),
        ("name", name),
        ("max_iterations", max_iterations),
    ):
        if value is not None:
            body[key] = value
    accepted = await gateway.post("/api/traces", body)
    trace_id = accepted["trace_id"]
    console.print(f"trace [bold]{trace_id}[/bold] · model {escape(model or info['default_model'])}")
    if not follow:
        console.print(f"follow it with: longhaul traces watch {trace_id}", style="dim")
        return 0
    follower = Follower(gateway, console)
    status = await follower.follow(trace_id)
    return await follower.conclude(trace_id, status)
