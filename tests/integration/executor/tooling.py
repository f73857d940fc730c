"""Instrumented tools for executor tests, loaded with
``LONGHAUL_EXECUTOR__TOOL_MODULES=tests.integration.executor.tooling``.

``record`` (and ``observe``, the same declared read-only) appends one JSON line per execution
(start and end, with the idempotency key, the executor's pid and wall-clock times) to the file
named in its arguments, so a test can check "at most twice, same key" and "never two
executors at once" across processes. ``record`` is declared ``idempotent`` (its log is keyed):
cut off by a crash, the effect ledger runs it again with the same key. ``gate`` (in process
only) parks a tool call until the test opens the gate; ``probe`` (in process only) reads the
trace's log as the call acts.
``CrashOnMarker`` is a middleware with a bug, for poison wake-ups.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable

from longhaul.agent import Middleware
from longhaul.agent.tools import Tool, ToolContext, tool
from longhaul.agent.turn import Turn

GATES: dict[str, asyncio.Event] = {}
LOG_PROBES: dict[str, Callable[[str], Awaitable[str]]] = {}
"""In process only: ``probe`` answers with what the test's function reads of the trace's log."""
ENTERED: dict[str, asyncio.Event] = {}


def _line(path: str, **fields: object) -> None:
    with open(path, "a") as out:
        out.write(json.dumps(fields) + "\n")


@tool(effects="idempotent")
async def record(ctx: ToolContext, step: int, log: str, hold_ms: int = 0) -> str:
    """Record this execution in a log file (tests).

    Args:
        step: which step of the script this is.
        log: the file to append to.
        hold_ms: how long the call lasts.
    """
    return await _record(ctx, step, log, hold_ms)


@tool(read_only=True)
async def observe(ctx: ToolContext, step: int, log: str, hold_ms: int = 0) -> str:
    """Record this execution in a log file, declared read-only: it may act while the message
    asking for it is still being appended (tests).

    Args:
        step: which step of the script this is.
        log: the file to append to.
        hold_ms: how long the call lasts.
    """
    return await _record(ctx, step, log, hold_ms)


async def _record(ctx: ToolContext, step: int, log: str, hold_ms: int) -> str:
    common = {"key": ctx.idempotency_key, "trace": ctx.trace_id, "step": step, "pid": os.getpid()}
    _line(log, phase="start", t=time.time(), **common)
    if hold_ms:
        await asyncio.sleep(hold_ms / 1000)  # the tool's own work, not synchronisation
    _line(log, phase="end", t=time.time(), **common)
    return f"step {step} done"


@tool
async def gate(name: str) -> str:
    """Wait until the test opens the gate (tests).

    Args:
        name: the gate.
    """
    ENTERED.setdefault(name, asyncio.Event()).set()
    await GATES.setdefault(name, asyncio.Event()).wait()
    return f"gate {name} passed"


@tool
async def probe(ctx: ToolContext, name: str, step: int) -> str:
    """Report what the trace's log holds as this call acts (tests).

    Args:
        name: the probe the test registered.
        step: which call this is.
    """
    return await LOG_PROBES[name](ctx.trace_id)


TOOLS: list[Tool] = [record, observe, gate, probe]


class CrashOnMarker(Middleware):
    """An operator middleware with a bug: every turn of a trace whose first message holds
    ``crash-me`` raises, so its wake-ups are poison (the executor must fail that trace only)."""

    async def before_agent(self, turn: Turn) -> None:
        first = turn.state.messages.get(1)
        if first is not None and "crash-me" in str(first.content):
            raise RuntimeError("a bug in an operator's middleware")
