"""``longhaul backup DIR`` / ``longhaul restore DIR``: a whole deployment through JetStream's
stream snapshots (``longhaul.core.backup``).

They talk to NATS, not to the gateway: the connection comes from the configuration
(``LONGHAUL_NATS__URL``, ``__NAMESPACE`` and an operator's credentials, such as ``longhaul
up``'s ``admin`` user in ``<data-dir>/nats-credentials.json``). A backup is taken while the
services run; a restore goes into a deployment whose services are stopped.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from longhaul.cli.context import console
from longhaul.core.backup import BackupError, Saved, back_up, restore_all
from longhaul.core.connection import connect
from longhaul.core.storage import human
from longhaul.domain.config import load_config
from rich.table import Table

Directory = Annotated[Path, typer.Argument(help="the backup's directory")]


def _table(title: str, saved: list[Saved]) -> Table:
    table = Table(title=title)
    for column in ("stream", "messages", "size"):
        table.add_column(column)
    for s in saved:
        table.add_row(s.stream, str(s.messages), human(s.bytes))
    return table


async def _backup(directory: Path) -> list[Saved]:
    conn = await connect(load_config().nats, name="longhaul-backup")
    try:
        return await back_up(conn, directory)
    finally:
        await conn.close()


async def _restore(directory: Path, replace: bool) -> list[Saved]:
    conn = await connect(load_config().nats, name="longhaul-restore")
    try:
        return await restore_all(conn, directory, replace=replace)
    finally:
        await conn.close()


def backup(directory: Directory) -> None:
    """Snapshot every stream of the deployment (events, buckets, objects) into DIR, while it
    runs."""
    try:
        saved = asyncio.run(_backup(directory))
    except BackupError as exc:
        console.print(f"[red]backup failed:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(_table(f"backed up into {directory}", saved))


def restore(
    directory: Directory,
    replace: Annotated[
        bool, typer.Option(help="delete the deployment's streams first (services stopped)")
    ] = False,
) -> None:
    """Recreate every stream of a backup; start the services afterwards: waiting traces
    wait again, running ones are taken up."""
    try:
        saved = asyncio.run(_restore(directory, replace))
    except BackupError as exc:
        console.print(f"[red]restore failed:[/red] {exc}")
        raise typer.Exit(1) from None
    console.print(_table(f"restored from {directory}", saved))
