"""Scripted-model files for executor tests (``scripted:<path>``): turn N answers the request
that already holds N assistant messages, so a trace resumed elsewhere continues the script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def write_script(path: Path, turns: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump(turns))
    return f"scripted:{path}"


BASH_STEPS_LOG = "bash-steps.log"


def record_steps(
    path: Path,
    steps: int,
    log: Path,
    *,
    hold_ms: int = 0,
    answer: str = "all steps done",
    tool: str = "record",
    held: dict[int, int] | None = None,
    bash_label: str | None = None,
) -> str:
    """``steps`` turns each calling ``tool`` (``record`` or ``observe``) once, then a final
    answer. ``held``: steps whose call holds longer (step → ms), e.g. one a test kills in.
    ``bash_label``: every odd step runs ``bash`` instead, appending ``<label>:<step>`` to
    ``BASH_STEPS_LOG`` in the trace's working directory (a sandboxed command writes only there)
    and holding as long."""
    longer = held or {}

    def step(n: int) -> dict[str, Any]:
        hold = longer.get(n, hold_ms)
        if bash_label is not None and n % 2:
            command = f"echo {bash_label}:{n} >> {BASH_STEPS_LOG}; sleep {hold / 1000:g}"
            return {"name": "bash", "arguments": {"command": command}}
        return {"name": tool, "arguments": {"step": n, "log": str(log), "hold_ms": hold}}

    turns: list[dict[str, Any]] = [{"tool_calls": [step(n)]} for n in range(steps)]
    turns.append({"content": answer})
    return write_script(path, turns)


def bulky_steps(path: Path, steps: int, log: Path, *, pad: int, hold_ms: int = 0) -> str:
    """``steps`` turns each thinking ``pad`` characters aloud, then calling ``record`` once,
    then a final answer: a trace that fills a stream quickly."""
    turns: list[dict[str, Any]] = [
        {
            "content": f"step {n} " + "x" * pad,
            "tool_calls": [
                {"name": "record", "arguments": {"step": n, "log": str(log), "hold_ms": hold_ms}}
            ],
        }
        for n in range(steps)
    ]
    return write_script(path, [*turns, {"content": "all steps done"}])


def family_script(path: Path, *, child_writes: str, then: tuple[str, ...] = ()) -> str:
    """A parent that delegates to a child which writes ``child_writes`` (a file name), then
    answers: children answer turns 0-1, a parent that starts with two assistant messages
    delegates at turn 2 and answers at 3; ``then`` answers the turns after."""
    write = {"name": "write", "arguments": {"path": child_writes, "content": "CHILD"}}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [write]},
        {"content": "child wrote it"},
        {"tool_calls": [{"name": "agent", "arguments": {"task": "write it"}}]},
        {"content": "parent done"},
        *({"content": answer} for answer in then),
    ]
    return write_script(path, turns)
