"""What every list and show command shares, as Temporal's CLI has it: ``-o table|json|jsonl``
(json carries every field with full ids), ``--limit``, ``--status``, ``--since``, ``--all``;
tables that never cut an id (the other columns shrink instead)."""

from __future__ import annotations

import datetime
import enum
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

import typer
from longhaul.cli.context import console
from pydantic import BaseModel
from rich.table import Table


class Format(enum.StrEnum):
    table = "table"
    json = "json"
    jsonl = "jsonl"


Output = Annotated[
    Format,
    typer.Option("--output", "-o", help="table, json (full records) or jsonl (one per line)"),
]
Limit = Annotated[int, typer.Option("--limit", "-n", min=1, max=500, help="at most this many")]
Statuses = Annotated[
    list[str] | None, typer.Option("--status", "-s", help="only these statuses (repeatable)")
]
Since = Annotated[
    str | None,
    typer.Option(help="only those started since: 30m, 2h, 7d or a date (2026-11-28T09:00)"),
]

_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def since_ts(text: str | None) -> float | None:
    """``--since`` as a Unix time: a duration back from now, or an ISO date/time (local)."""
    if text is None:
        return None
    match = _AGO.match(text.strip())
    if match:
        return time.time() - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        return datetime.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither a duration (30m, 2h, 7d) nor a date", param_hint="--since"
        ) from None


def emit(items: Sequence[BaseModel], output: Format, table: Callable[[], Table]) -> None:
    """Print ``items`` as ``output`` (a table made by ``table``)."""
    if not emit_records(items, output):
        console.print(table())


def emit_records(items: Sequence[BaseModel], output: Format) -> bool:
    """Print ``items`` as json or jsonl and say so (False for a table). Written raw, without
    wrapping or markup, so a script can read them."""
    if output is Format.table:
        return False
    records = [item.model_dump(mode="json") for item in items]
    if output is Format.json:
        sys.stdout.write(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    return True


def emit_one(item: BaseModel | dict[str, Any], output: Format) -> bool:
    """For a show command: print ``item`` as json (jsonl: one line) and say so; False for a
    table, which the command renders itself."""
    if output is Format.table:
        return False
    record = item.model_dump(mode="json") if isinstance(item, BaseModel) else item
    indent = 2 if output is Format.json else None
    sys.stdout.write(json.dumps(record, indent=indent, ensure_ascii=False) + "\n")
    return True


def table_of(columns: Iterable[str], ids: dict[str, Iterable[str]]) -> Table:
    """A table whose id columns (``ids``: column -> the ids it will hold) are as wide as their
    longest id and never wrap: the other columns shrink or wrap instead."""
    table = Table(show_edge=False, header_style="bold")
    for column in columns:
        if column in ids:
            width = max((len(value) for value in ids[column]), default=len(column))
            table.add_column(column, no_wrap=True, min_width=max(width, len(column)))
        else:
            table.add_column(column, overflow="fold")
    return table
