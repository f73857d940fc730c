"""``longhaul traces …`` and ``longhaul replay``: inspect and steer traces."""

from __future__ import annotations

import datetime
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from longhaul.cli.context import console, execute
from longhaul.cli.follow import Follower
from longhaul.cli.listing import (
    Format,
    Limit,
    Output,
    Since,
    Statuses,
    emit,
    emit_one,
    emit_records,
    since_ts,
)
from longhaul.cli.render import (
    Yes,
    clip,
    describe,
    erased,
    goal_tree,
    money,
    status_text,
    traces_table,
)
from longhaul.client import Accepted, AsyncClient
from longhaul.client.models import TraceSummary
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

app = typer.Typer(no_args_is_help=True, help="List, inspect and steer traces.")

TraceId = Annotated[str, typer.Argument(help="trace id (t_…)")]
Follow = Annotated[bool, typer.Option("--follow", "-f", help="stream the trace until it ends")]


PAGE = 500
MAX_SCANNED = 20_000  # a bound on one listing's requests (40 pages)


@app.command("ls")
def list_traces(
    ctx: typer.Context,
    status: Statuses = None,
    parent: Annotated[str | None, typer.Option(help="only sub-traces of this trace")] = None,
    since: Since = None,
    every: Annotated[
        bool, typer.Option("--all", "-a", help="sub-traces and task steps too, not only roots")
    ] = False,
    evals: Annotated[
        bool, typer.Option("--evals", help="the runs of evals too (`longhaul eval`)")
    ] = False,
    limit: Limit = 50,
    output: Output = Format.table,
) -> None:
    """Your traces, newest first by start time; roots only unless --all (or --parent), not
    the runs of evals unless --evals."""
    floor = since_ts(since)

    async def command(client: AsyncClient) -> None:
        # Ids are not all time-ordered (eval runs have keyed ids): gather, then sort.
        found: list[TraceSummary] = []
        cursor: str | None = None
        for _ in range(MAX_SCANNED // PAGE):
            page = await client.list_traces(
                status=status, parent=parent, limit=PAGE, cursor=cursor, evals=evals
            )
            found.extend(
                trace
                for trace in page.traces
                if (floor is None or trace.created_at >= floor)
                and (every or parent is not None or not (trace.parent_trace_id or trace.task_id))
            )
            cursor = page.next_cursor
            if cursor is None:
                break
        found.sort(key=lambda trace: trace.created_at, reverse=True)
        if not found and output is Format.table:
            console.print('no traces: start one with longhaul run "…"', style="dim")
            return
        emit(found[:limit], output, lambda: traces_table(found[:limit]))
        if len(found) > limit and output is Format.table:
            console.print(f"{len(found) - limit} more: --limit {len(found)}", style="dim")

    execute(ctx, command)


@app.command("show")
def show(ctx: typer.Context, trace_id: TraceId, output: Output = Format.table) -> None:
    """Status, totals, goal tree and sub-traces of a trace."""

    async def command(client: AsyncClient) -> None:
        trace = await client.get_trace(trace_id)
        if emit_one(trace, output):
            return
        grid = Table.grid(padding=(0, 2))
        rows: list[tuple[str, Any]] = [
            ("status", status_text(trace.status)),
            ("name", escape(trace.name or "")),
            ("model", escape(trace.model or "(default)")),
            ("messages", f"{trace.last_sequence} (head #{trace.head_sequence})"),
            ("tokens", f"{trace.totals.tokens:,}"),
            ("cost", money(trace.totals.cost)),
            ("parent", trace.parent_trace_id or "-"),
        ]
        for label, value in (
            ("waiting for", trace.wait_reason),
            ("error", trace.error),
            ("stop reason", trace.stop_reason),
            ("summary", trace.summary),
        ):
            if value:
                rows.append((label, escape(value)))
        for label, shown in rows:
            grid.add_row(f"[dim]{label}[/dim]", shown)
        console.print(Panel(grid, title=trace_id, expand=False))
        if trace.goal_tree.goals:
            console.print(goal_tree(trace.goal_tree))
        for pending in trace.pending_approvals:
            if pending.outcome_unknown:
                console.print(
                    f"[red]outcome unknown[/red] {pending.tool_call_id} "
                    f"{escape(pending.name)}({escape(pending.arguments[:200])}) was cut off by a "
                    "crash while it acted  [dim]longhaul traces approve (run again) | "
                    f"took-effect | deny (it failed) {trace_id} {pending.tool_call_id}[/dim]"
                )
                continue
            console.print(
                f"[yellow]needs approval[/yellow] {pending.tool_call_id} "
                f"{escape(pending.name)}({escape(pending.arguments[:200])})  "
                f"[dim]longhaul traces approve|deny {trace_id} {pending.tool_call_id}[/dim]"
            )
        for effect in trace.cut_off_effects:
            how = " → ".join(effect.resolutions)
            decided = f", a person: {effect.decision}" if effect.decision else ""
            console.print(
                f"[dim]cut off by a crash[/dim] {effect.tool_call_id} {escape(effect.tool)} "
                f"({effect.effects}): {how}{decided}"
                + ("" if effect.settled else " [yellow](unsettled)[/yellow]")
            )
        for sub in trace.sub_traces:
            console.print(
                f"sub-trace {sub.trace_id} ",
                status_text(sub.status),
                f" {escape(sub.mode)}: {escape(sub.task[:80])}",
            )
        for below in trace.waiting_below:
            console.print(f"[yellow]waiting below[/yellow] {below.trace_id} for {below.reason}")

    execute(ctx, command)


@app.command("messages")
def messages(
    ctx: typer.Context,
    trace_id: TraceId,
    all_branches: Annotated[
        bool, typer.Option("--all", help="every branch, not only the main path")
    ] = False,
    output: Output = Format.table,
) -> None:
    """The conversation: the main path (head back to root) or every message."""

    async def command(client: AsyncClient) -> None:
        mode = "all" if all_branches else "main_path"
        body = await client.messages(trace_id, mode=mode)
        if emit_records(body.messages, output):
            return
        for message in body.messages:
            header = f"[bold]#{message.sequence} {message.role}[/bold]"
            if message.parent_sequence is not None:
                header += f" [dim]← #{message.parent_sequence}[/dim]"
            console.print(header)
            if message.text:
                console.print(escape(message.text))
            for call in message.tool_calls or []:
                shown = f"{call.function.name}({clip(call.function.arguments, 80)})"
                console.print(f"  → {escape(shown)}", style="magenta")

    execute(ctx, command)


@app.command("watch")
def watch(ctx: typer.Context, trace_id: TraceId) -> None:
    """Print the trace's events so far, then follow it live until it ends."""

    async def command(client: AsyncClient) -> int:
        trace = await client.get_trace(trace_id)
        follower = Follower(client, console)
        if trace.is_final or trace.needs_client:
            async for item in client.events(trace_id, follow=False):
                console.print(describe(item.event, item.data))
            return await follower.conclude(trace_id, trace.status)
        status = await follower.follow(trace_id, history_until=trace.event_id)
        return await follower.conclude(trace_id, status)

    execute(ctx, command)


def _steer(
    ctx: typer.Context,
    trace_id: str,
    action: str,
    request: Callable[[AsyncClient], Awaitable[Accepted]],
    follow: bool,
) -> None:
    async def command(client: AsyncClient) -> int:
        accepted = await request(client)
        console.print(f"{action}: accepted (trace {trace_id} is {accepted.status})")
        if not follow:
            return 0
        follower = Follower(client, console)
        event_id = accepted.event_id
        status = await follower.follow(trace_id, after=event_id - 1, history_until=event_id)
        return await follower.conclude(trace_id, status)

    execute(ctx, command)


@app.command("stop")
def stop(ctx: typer.Context, trace_id: TraceId, follow: Follow = False) -> None:
    """Ask a running or waiting trace to stop."""
    _steer(ctx, trace_id, "stop", lambda client: client.stop(trace_id), follow)


@app.command("delete")
def delete(
    ctx: typer.Context,
    trace_id: TraceId,
    yes: Yes = False,
) -> None:
    """Delete a trace and its sub-traces everywhere they are stored (stopped first)."""
    if not yes:
        typer.confirm(f"erase trace {trace_id} and its sub-traces for good?", abort=True)

    async def command(client: AsyncClient) -> None:
        console.print(erased(await client.delete(trace_id)))

    execute(ctx, command)


@app.command("export")
def export(
    ctx: typer.Context,
    trace_id: TraceId,
    out: Annotated[Path, typer.Option("-o", "--output", help="where to write the bundle")],
) -> None:
    """Write a trace and its sub-traces, with their stored outputs, as one bundle file."""

    async def command(client: AsyncClient) -> None:
        bundle = await client.export_trace(trace_id)
        out.write_bytes(bundle)
        console.print(f"{trace_id} → {out} ({len(bundle)} bytes)")

    execute(ctx, command)


@app.command("import")
def import_(
    ctx: typer.Context,
    bundle: Annotated[Path, typer.Argument(help="a file `longhaul traces export` wrote")],
) -> None:
    """Recreate an exported trace family under your key, with new ids."""

    async def command(client: AsyncClient) -> None:
        imported = await client.import_trace(bundle.read_bytes())
        console.print(f"imported as {imported.trace_id} ({len(imported.traces)} trace(s))")

    execute(ctx, command)


@app.command("resume")
def resume(ctx: typer.Context, trace_id: TraceId, follow: Follow = False) -> None:
    """Continue a stopped, failed or completed trace from its head."""
    _steer(ctx, trace_id, "resume", lambda client: client.resume(trace_id), follow)


@app.command("rewind")
def rewind(
    ctx: typer.Context,
    trace_id: TraceId,
    after_sequence: Annotated[int, typer.Argument(min=1, help="keep messages up to this sequence")],
    message: Annotated[
        str | None, typer.Option("--message", "-m", help="a new user message")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="fork with another model from here (compare the branches in the viewer)"),
    ] = None,
    follow: Follow = False,
) -> None:
    """Continue from message N: later messages fall off the main path (regenerate when no
    new message is given)."""
    _steer(
        ctx,
        trace_id,
        "run",
        lambda client: client.run(
            trace_id, message or None, after_sequence=after_sequence, model=model
        ),
        follow,
    )


@app.command("reply")
def reply(
    ctx: typer.Context,
    trace_id: TraceId,
    text: Annotated[str, typer.Argument(help="your answer")],
    follow: Follow = False,
) -> None:
    """Answer a trace that waits for a human."""
    _steer(ctx, trace_id, "reply", lambda client: client.reply(trace_id, text), follow)


CallId = Annotated[str, typer.Argument(help="the pending tool call's id (see `traces show`)")]
Reason = Annotated[str | None, typer.Option("--reason", help="told to the model")]


@app.command("approve")
def approve(
    ctx: typer.Context,
    trace_id: TraceId,
    tool_call_id: CallId,
    reason: Reason = None,
    arguments: Annotated[
        str | None,
        typer.Option(
            "--arguments",
            "-a",
            help="run it with these arguments instead (a JSON object, or @file.json)",
        ),
    ] = None,
    follow: Follow = False,
) -> None:
    """Let one tool call that waits for approval run (as the model wrote it, or edited)."""
    edited = None if arguments is None else _json_object(arguments)
    _decide(ctx, trace_id, tool_call_id, approved=True, reason=reason, follow=follow, edited=edited)


def _json_object(text: str) -> dict[str, Any]:
    if text.startswith("@"):
        text = Path(text[1:]).read_text(encoding="utf-8")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc}", param_hint="--arguments") from exc
    if not isinstance(value, dict):
        raise typer.BadParameter("a JSON object is needed", param_hint="--arguments")
    return value


@app.command("deny")
def deny(
    ctx: typer.Context,
    trace_id: TraceId,
    tool_call_id: CallId,
    reason: Reason = None,
    follow: Follow = False,
) -> None:
    """Refuse one tool call that waits for approval; the model is told, with the reason. For
    a call whose outcome is unknown: it did not take effect."""
    _decide(ctx, trace_id, tool_call_id, approved=False, reason=reason, follow=follow)


@app.command("took-effect")
def took_effect(
    ctx: typer.Context,
    trace_id: TraceId,
    tool_call_id: CallId,
    reason: Reason = None,
    follow: Follow = False,
) -> None:
    """Answer a call whose outcome is unknown (cut off by a crash): it did take effect; it is
    not run again and the model is told so, with the reason (say what it returned)."""
    _decide(ctx, trace_id, tool_call_id, approved=False, reason=reason, follow=follow, done=True)


def _decide(
    ctx: typer.Context,
    trace_id: str,
    tool_call_id: str,
    *,
    approved: bool,
    reason: str | None,
    follow: bool,
    done: bool = False,
    edited: dict[str, Any] | None = None,
) -> None:
    _steer(
        ctx,
        trace_id,
        "approve",
        lambda client: client.approve(
            trace_id,
            tool_call_id,
            approved=approved,
            reason=reason,
            took_effect=done,
            arguments=edited,
        ),
        follow,
    )


def replay(ctx: typer.Context, trace_id: str) -> None:
    """Print the trace's event timeline, from its log."""

    async def command(client: AsyncClient) -> None:
        start: float | None = None
        async for item in client.events(trace_id, follow=False):
            ts = float(item.data.get("ts", 0.0))
            start = ts if start is None else start
            clock = datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]
            actor = escape(str(item.data.get("actor", "")))
            console.print(
                f"[dim]{item.id:>6} {clock} +{ts - start:8.3f}s {actor:<18}[/dim] "
                f"{describe(item.event, item.data)}"
            )

    execute(ctx, command)
