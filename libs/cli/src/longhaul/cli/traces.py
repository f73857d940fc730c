"""``longhaul traces …`` and ``longhaul replay``: inspect and steer traces."""

from __future__ import annotations

import datetime
from typing import Annotated, Any

import typer
from longhaul.cli.client import Gateway
from longhaul.cli.context import console, execute
from longhaul.cli.follow import FINAL, Follower
from longhaul.cli.render import (
    call_text,
    content_text,
    describe,
    goal_tree,
    money,
    status_text,
    tokens,
    traces_table,
)
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="List, inspect and steer traces.")

TraceId = Annotated[str, typer.Argument(help="trace id (t_…)")]
Follow = Annotated[bool, typer.Option("--follow", "-f", help="stream the trace until it ends")]


@app.command("ls")
def list_traces(
    ctx: typer.Context,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", "-s", help="running, waiting, completed, failed, stopped"),
    ] = None,
    parent: Annotated[str | None, typer.Option(help="only sub-traces of this trace")] = None,
    limit: Annotated[int, typer.Option(min=1, max=500)] = 50,
) -> None:
    """Your traces, newest first."""

    async def command(gateway: Gateway) -> None:
        page = await gateway.get("/api/traces", status=status or None, parent=parent, limit=limit)
        if not page["traces"]:
            console.print('no traces yet: start one with longhaul run "…"', style="dim")
            return
        console.print(traces_table(page["traces"]))
        if page["next_cursor"]:
            console.print(f"more: --limit {limit * 2}", style="dim")

    execute(ctx, command)


@app.command("show")
def show(ctx: typer.Context, trace_id: TraceId) -> None:
    """Status, totals, goal tree and sub-traces of a trace."""

    async def command(gateway: Gateway) -> None:
        trace = await gateway.get(f"/api/traces/{trace_id}")
        grid = Table.grid(padding=(0, 2))
        rows: list[tuple[str, Any]] = [
            ("status", status_text(trace["status"])),
            ("name", escape(trace.get("name") or "")),
            ("model", escape(trace.get("model") or "(default)")),
            ("messages", f"{trace['last_sequence']} (head #{trace['head_sequence']})"),
            ("tokens", f"{tokens(trace['totals']):,}"),
            ("cost", money(trace["totals"]["cost"])),
            ("parent", trace.get("parent_trace_id") or "-"),
        ]
        for label, key in (
            ("waiting for", "wait_reason"),
            ("error", "error"),
            ("stop reason", "stop_reason"),
            ("summary", "summary"),
        ):
            if trace.get(key):
                rows.append((label, escape(str(trace[key]))))
        for label, value in rows:
            grid.add_row(f"[dim]{label}[/dim]", value)
        console.print(Panel(grid, title=trace_id, expand=False))
        if trace["goal_tree"]["goals"]:
            console.print(goal_tree(trace["goal_tree"]["goals"], trace["goal_tree"]["focus"]))
        for pending in trace.get("pending_approvals", []):
            console.print(
                f"[yellow]needs approval[/yellow] {pending['tool_call_id']} "
                f"{escape(pending['name'])}({escape(pending['arguments'][:200])})  "
                f"[dim]longhaul traces approve|deny {trace_id} {pending['tool_call_id']}[/dim]"
            )
        for sub in trace["sub_traces"]:
            console.print(
                f"sub-trace {sub['trace_id']} ",
                status_text(sub["status"]),
                f" {escape(sub['mode'])}: {escape(sub['task'][:80])}",
            )
        for below in trace.get("waiting_below", []):
            console.print(
                f"[yellow]waiting below[/yellow] {below['trace_id']} for {below['reason']}"
            )

    execute(ctx, command)


@app.command("messages")
def messages(
    ctx: typer.Context,
    trace_id: TraceId,
    all_branches: Annotated[
        bool, typer.Option("--all", help="every branch, not only the main path")
    ] = False,
) -> None:
    """The conversation: the main path (head back to root) or every message."""

    async def command(gateway: Gateway) -> None:
        mode = "all" if all_branches else "main_path"
        body = await gateway.get(f"/api/traces/{trace_id}/messages", mode=mode)
        for message in body["messages"]:
            header = f"[bold]#{message['sequence']} {message['role']}[/bold]"
            if message.get("parent_sequence") is not None:
                header += f" [dim]← #{message['parent_sequence']}[/dim]"
            console.print(header)
            text = content_text(message.get("content"))
            if text:
                console.print(escape(text))
            for call in message.get("tool_calls") or []:
                console.print(f"  → {escape(call_text(call))}", style="magenta")

    execute(ctx, command)


@app.command("watch")
def watch(ctx: typer.Context, trace_id: TraceId) -> None:
    """Print the trace's events so far, then follow it live until it ends."""

    async def command(gateway: Gateway) -> int:
        trace = await gateway.get(f"/api/traces/{trace_id}")
        follower = Follower(gateway, console)
        if trace["status"] in FINAL or trace["wait_reason"] in ("human", "approval"):
            async for item in gateway.events(f"/api/traces/{trace_id}/events", follow=False):
                console.print(describe(item.event, item.data))
            return await follower.conclude(trace_id, trace["status"])
        status = await follower.follow(trace_id, history_until=trace["event_id"])
        return await follower.conclude(trace_id, status)

    execute(ctx, command)


def _steer(ctx: typer.Context, trace_id: str, action: str, body: Any, follow: bool) -> None:
    async def command(gateway: Gateway) -> int:
        accepted = await gateway.post(f"/api/traces/{trace_id}/{action}", body)
        console.print(f"{action}: accepted (trace {trace_id} is {accepted['status']})")
        if not follow:
            return 0
        follower = Follower(gateway, console)
        event_id = accepted["event_id"]
        status = await follower.follow(trace_id, after=event_id - 1, history_until=event_id)
        return await follower.conclude(trace_id, status)

    execute(ctx, command)


@app.command("stop")
def stop(ctx: typer.Context, trace_id: TraceId, follow: Follow = False) -> None:
    """Ask a running or waiting trace to stop."""
    _steer(ctx, trace_id, "stop", None, follow)


@app.command("resume")
def resume(ctx: typer.Context, trace_id: TraceId, follow: Follow = False) -> None:
    """Continue a stopped, failed or completed trace from its head."""
    _steer(ctx, trace_id, "resume", None, follow)


@app.command("rewind")
def rewind(
    ctx: typer.Context,
    trace_id: TraceId,
    after_sequence: Annotated[int, typer.Argument(min=1, help="keep messages up to this sequence")],
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="a new user message")
    ] = None,
    follow: Follow = False,
) -> None:
    """Continue from message N: later messages fall off the main path (regenerate when no
    new message is given)."""
    body: dict[str, Any] = {"after_sequence": after_sequence}
    if message:
        body["messages"] = [{"role": "user", "content": message}]
    _steer(ctx, trace_id, "run", body, follow)


@app.command("reply")
def reply(
    ctx: typer.Context,
    trace_id: TraceId,
    text: Annotated[str, typer.Argument(help="your answer")],
    follow: Follow = False,
) -> None:
    """Answer a trace that waits for a human."""
    _steer(ctx, trace_id, "reply", {"content": text}, follow)


CallId = Annotated[str, typer.Argument(help="the pending tool call's id (see `traces show`)")]
Reason = Annotated[str | None, typer.Option("--reason", help="told to the model")]


@app.command("approve")
def approve(
    ctx: typer.Context,
    trace_id: TraceId,
    tool_call_id: CallId,
    reason: Reason = None,
    follow: Follow = False,
) -> None:
    """Let one tool call that waits for approval run."""
    _decide(ctx, trace_id, tool_call_id, approved=True, reason=reason, follow=follow)


@app.command("deny")
def deny(
    ctx: typer.Context,
    trace_id: TraceId,
    tool_call_id: CallId,
    reason: Reason = None,
    follow: Follow = False,
) -> None:
    """Refuse one tool call that waits for approval; the model is told, with the reason."""
    _decide(ctx, trace_id, tool_call_id, approved=False, reason=reason, follow=follow)


def _decide(
    ctx: typer.Context,
    trace_id: str,
    tool_call_id: str,
    *,
    approved: bool,
    reason: str | None,
    follow: bool,
) -> None:
    body = {"tool_call_id": tool_call_id, "approved": approved, "reason": reason}
    _steer(ctx, trace_id, "approve", body, follow)


def replay(ctx: typer.Context, trace_id: str) -> None:
    """Print the trace's event timeline, from its log."""

    async def command(gateway: Gateway) -> None:
        start: float | None = None
        async for item in gateway.events(f"/api/traces/{trace_id}/events", follow=False):
            ts = float(item.data.get("ts", 0.0))
            start = ts if start is None else start
            clock = datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]
            actor = escape(str(item.data.get("actor", "")))
            console.print(
                f"[dim]{item.id:>6} {clock} +{ts - start:8.3f}s {actor:<18}[/dim] "
                f"{describe(item.event, item.data)}"
            )

    execute(ctx, command)
