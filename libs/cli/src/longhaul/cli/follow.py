"""Following a trace live: event lines, a status line (step, tool calls, tokens, cost, a
spinner while the model thinks), and the answer at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from longhaul.cli.render import describe, money
from longhaul.client import AsyncClient, StreamLost
from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text

EXIT_CODES = {"completed": 0, "waiting": 0, "failed": 1, "stopped": 1}


@dataclass
class Progress:
    steps: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    activity: str = "starting"
    thinking: str = ""

    def count(self, data: dict[str, Any]) -> None:
        usage = data.get("usage") or {}
        self.tokens += int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        self.cost += float(data.get("cost", 0.0))
        if data.get("role") == "assistant":
            self.steps += 1
            self.tool_calls += len(data.get("tool_calls") or [])
            self.thinking = ""

    def line(self) -> Text:
        text = Text.assemble(
            (f"step {self.steps}", "bold"),
            f" · {self.tool_calls} tool calls",
            f" · {self.tokens:,} tokens · {money(self.cost)} · ",
            (self.activity, "cyan"),
        )
        if self.thinking:
            text.append("  " + self.thinking[-80:].replace("\n", " "), style="dim")
        return text


class Follower:
    def __init__(self, client: AsyncClient, console: Console) -> None:
        self.client = client
        self.console = console
        self.progress = Progress()

    @contextlib.contextmanager
    def _status(self) -> Iterator[Live | None]:
        if not self.console.is_terminal:
            yield None
            return
        spinner = Spinner("dots", text=self.progress.line())
        with Live(spinner, console=self.console, transient=True, refresh_per_second=8) as live:
            yield live

    def _refresh(self, live: Live | None) -> None:
        if live is not None:
            live.update(Spinner("dots", text=self.progress.line()))

    def _on_live(self, data: dict[str, Any]) -> None:
        kind = data.get("kind")
        if kind == "delta":
            self.progress.activity = "model is writing"
            self.progress.thinking += str(data.get("text", ""))
        elif kind == "tool_start":
            self.progress.activity = f"running {data.get('tool')}"
        elif kind == "tool_end":
            self.progress.activity = "model is thinking"
        elif kind == "retry":
            notice = escape(str(data.get("text", "")))
            self.console.print(f"[yellow]retrying the model call:[/yellow] {notice}")

    async def follow(self, trace_id: str, *, after: int = 0, history_until: int = 0) -> str:
        """Print events from ``after`` until the trace ends or waits for a person; returns the
        status it ended in. Final events up to ``history_until`` belong to earlier runs."""
        with self._status() as live:
            async for item in self.client.events(trace_id, after=after):
                if item.event == "live":
                    self._on_live(item.data)
                    self._refresh(live)
                    continue
                self.console.print(describe(item.event, item.data), highlight=False)
                if item.event == "message_appended":
                    self.progress.count(item.data)
                    self.progress.activity = "model is thinking"
                self._refresh(live)
                if item.ends_run and (item.id or 0) > history_until:
                    return "waiting" if item.event == "waiting" else item.event
        raise StreamLost("the event stream ended before the trace did")

    async def conclude(self, trace_id: str, status: str) -> int:
        """Print the outcome (answer, question or error) and return the exit code."""
        trace = await self.client.get_trace(trace_id)
        summary = (
            f"{trace.status} · {trace.totals.tokens:,} "
            f"tokens · {money(trace.totals.cost)} · trace {trace_id}"
        )
        if status == "completed":
            messages = (await self.client.messages(trace_id)).messages
            answer = next(
                (m.text for m in reversed(messages) if m.role == "assistant" and m.text), ""
            )
            self.console.print(Panel(escape(answer) or "(no text)", title="answer", expand=False))
        elif status == "waiting" and trace.wait_reason == "approval":
            calls = [
                f"{p.tool_call_id}: {escape(p.name)}({escape(p.arguments[:200])})"
                for p in trace.pending_approvals
            ]
            self.console.print(
                Panel(
                    Group(
                        *calls,
                        Text(
                            f"\nlonghaul traces approve|deny {trace_id} <call id> [--reason …]",
                            style="dim",
                        ),
                    ),
                    title="tool calls wait for approval",
                    expand=False,
                )
            )
        elif status == "waiting":
            self.console.print(
                Panel(
                    Group(
                        escape(trace.wait_detail or "the agent needs an answer"),
                        Text(f'\nreply: longhaul traces reply {trace_id} "…"', style="dim"),
                    ),
                    title="the agent asks",
                    expand=False,
                )
            )
        else:
            reason = trace.error or trace.stop_reason or status
            self.console.print(f"[red]{status}[/red]: {escape(str(reason))}")
        self.console.print(summary, style="dim", highlight=False)
        return EXIT_CODES.get(status, 1)
