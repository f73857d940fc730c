"""Terminal rendering shared by the commands: one-line event descriptions, messages, tables."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from longhaul.cli.listing import table_of
from longhaul.client.models import Erased, GoalTree, TraceSummary, content_text
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

STATUS_STYLE = {
    "running": "cyan",
    "waiting": "yellow",
    "completed": "green",
    "failed": "red",
    "stopped": "magenta",
    "planning": "cyan",
    "awaiting_review": "yellow",
    "cancelled": "magenta",
}


def clip(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def call_text(call: dict[str, Any]) -> str:
    """``name(arguments…)`` of an OpenAI-format tool call as an event carries it."""
    function = call.get("function", {})
    return f"{function.get('name', '?')}({clip(str(function.get('arguments', '')), 80)})"


def status_text(status: str | None) -> Text:
    name = status or "?"
    return Text(name, style=STATUS_STYLE.get(name, ""))


def money(value: float) -> str:
    return f"${value:.4f}"


def ago(ts: float) -> str:
    seconds = max(0.0, time.time() - ts)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


def describe(event: str, data: dict[str, Any]) -> str:
    """A one-line, markup-safe summary of a stored event."""
    match event:
        case "trace_created":
            first: dict[str, Any] = next(
                (m for m in data.get("messages", []) if m.get("role") == "user"), {}
            )
            return f"created: {escape(clip(content_text(first.get('content'))))}"
        case "run_requested":
            cut = data.get("after_sequence")
            what = f"rewind after #{cut}" if cut is not None else "continue"
            added = [content_text(m.get("content")) for m in data.get("messages", [])]
            return f"{what}" + (f": {escape(clip(' / '.join(added)))}" if added else "")
        case "message_appended":
            return _describe_message(data)
        case "goal_changed":
            goal = data.get("goal", {})
            return f"goal {data.get('op')}: {escape(goal.get('title') or goal.get('id', ''))}"
        case "waiting":
            return f"waiting for {data.get('reason')}: {escape(clip(str(data.get('detail', ''))))}"
        case "human_replied":
            return f"human replied: {escape(clip(data.get('content', '')))}"
        case "subtrace_spawned":
            # The event omits its defaults: no mode on the wire means a delegate.
            mode = data.get("mode") or "delegate"
            task = data.get("task") or ""
            return f"sub-trace {data.get('child_trace_id')} ({mode})" + (
                f": {escape(clip(task))}" if task else ""
            )
        case "subtrace_finished":
            return f"sub-trace {data.get('child_trace_id')} {data.get('status')}"
        case "model_switched":
            return (
                f"[yellow]model switched[/yellow] {escape(str(data.get('from', '')))} → "
                f"{escape(str(data.get('to', '')))} ({escape(str(data.get('reason', '')))})"
            )
        case "completed":
            return f"[green]completed[/green] {escape(clip(data.get('summary', '')))}"
        case "failed":
            return f"[red]failed[/red]: {escape(clip(data.get('error', '')))}"
        case "stopped":
            return f"[magenta]stopped[/magenta] ({data.get('reason', '')})"
        case "verification_failed":
            return f"verification failed: {escape(clip('; '.join(data.get('errors', []))))}"
        case "phase_started" | "phase_completed" | "phase_failed":
            return f"{event.replace('_', ' ')}: {data.get('phase_id')}"
        case "plan_created" | "replanned":
            names = [p.get("name", p.get("id")) for p in data.get("phases", [])]
            return f"{event.replace('_', ' ')}: {escape(', '.join(names))}"
        case _:
            return event.replace("_", " ")


def _describe_message(data: dict[str, Any]) -> str:
    role = data.get("role", "?")
    seq = data.get("sequence")
    text = escape(clip(content_text(data.get("content"))))
    if role == "assistant" and data.get("tool_calls"):
        calls = ", ".join(escape(call_text(c)) for c in data["tool_calls"])
        return f"#{seq} assistant → {calls}" + (f"  {text}" if text else "")
    if role == "tool":
        style = "red" if data.get("error_code") else "dim"
        return f"#{seq} [{style}]tool {escape(data.get('name') or '')}: {text}[/{style}]"
    return f"#{seq} {role}: {text}"


def traces_table(traces: list[TraceSummary]) -> Table:
    columns = ("trace", "status", "name", "msgs", "tokens", "cost", "started")
    table = table_of(columns, {"trace": [t.trace_id for t in traces]})
    for trace in traces:
        table.add_row(
            trace.trace_id,
            status_text(trace.status),
            escape(trace.name or ""),
            str(trace.last_sequence),
            f"{trace.totals.tokens:,}",
            money(trace.totals.cost),
            ago(trace.created_at),
        )
    return table


def goal_tree(tree: GoalTree) -> Tree:
    marks = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "abandoned": "[-]"}
    root = Tree("goals")
    nodes: dict[str | None, Tree] = {None: root}
    for goal in tree.goals:
        parent = nodes.get(goal.parent_id, root)
        # the mark is escaped too: Rich would read "[x]" as markup and drop it
        label = f"{escape(marks.get(goal.status, '[?]'))} {escape(goal.title)}"
        if goal.id == tree.focus:
            label += " [bold](focus)[/bold]"
        nodes[goal.id] = parent.add(label)
    return root


Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]


def erased(report: Erased) -> str:
    """One line saying what a delete removed."""
    return (
        f"deleted {len(report.deleted)} aggregate(s): {report.events} events, "
        f"{report.entries} stored entries, {report.objects} objects; "
        f"working directory {report.working_dir}"
    )
