"""``longhaul backup DIR`` / ``longhaul restore DIR``: a whole deployment — every stream of
its namespace through JetStream's snapshots (``longhaul.core.backup``) and the agents'
working files (``longhaul.core.workfiles``).

They talk to NATS, not to the gateway: the connection comes from the configuration
(``LONGHAUL_NATS__URL``, ``__NAMESPACE`` and an operator's credentials, such as ``longhaul
up``'s ``admin`` user in ``<data-dir>/nats-credentials.json``). The working files are read
from and written to ``--workdir`` (default: ``LONGHAUL_WORKING_ROOT``, else ``longhaul up``'s
``<data-dir>/work``). A backup is taken while the services run; a restore goes into a
deployment without the streams (``longhaul up --restore DIR``), or over one whose services are
stopped (``--replace``).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from longhaul.cli.context import console, errors
from longhaul.core import workfiles
from longhaul.core.backup import (
    WORKDIR_ARCHIVE,
    BackupError,
    Saved,
    back_up,
    read_manifest,
    restore_all,
)
from longhaul.core.config import LonghaulConfig, NatsConfig, load_config
from longhaul.core.connection import connect
from longhaul.core.storage import human
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

Directory = Annotated[Path, typer.Argument(help="the backup's directory")]
Workdir = Annotated[
    Path | None,
    typer.Option(
        help="the agents' working files (default: LONGHAUL_WORKING_ROOT, else <data-dir>/work)",
        show_default=False,
    ),
]


class RichProgress:
    """``longhaul.core.backup.Progress`` drawn as rich progress bars, one per step."""

    def __init__(self, out: Console) -> None:
        self.bars = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            console=out,
            transient=True,
        )
        self.out = out
        self.task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def begin(self, label: str, total: int | None) -> None:
        self.task = self.bars.add_task(escape(label), total=total)

    def advance(self, amount: int) -> None:
        if self.task is not None:
            self.bars.advance(self.task, amount)

    def end(self, summary: str) -> None:
        if self.task is not None:
            self.bars.remove_task(self.task)
            self.task = None
        self.out.print(f"[green]✓[/green] {escape(summary)}")


def supervisor_running(data_dir: Path, nats_url: str) -> list[str]:
    """``longhaul up``'s own word, when its state file in ``data_dir`` names a live process
    on ``nats_url``: its services are running."""
    try:
        state = json.loads((data_dir / "up.json").read_text())
        pid, url = int(state["pid"]), str(state["nats"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [f"longhaul up (pid {pid}, {data_dir / 'up.json'}) runs them"] if url == nats_url else []


def default_workdir(config: LonghaulConfig) -> Path:
    return (config.working_root or config.data_dir / "work").resolve()


def _holds_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _table(title: str, saved: list[Saved]) -> Table:
    table = Table(title=title)
    for column in ("stream", "messages", "size"):
        table.add_column(column)
    for s in saved:
        if s.data:
            table.add_row(s.stream, str(s.messages), human(s.bytes))
        else:
            table.add_row(s.stream, "—", "configuration only")
    return table


async def _backup(nats: NatsConfig, directory: Path, workdir: Path | None) -> list[Saved]:
    def files() -> dict[str, Any]:
        if workdir is None:
            return {"workdir": None}
        target = directory / WORKDIR_ARCHIVE
        archived = workfiles.archive(workdir, target, exclude=directory, progress=progress)
        for skipped in archived.skipped:
            console.print(f"[yellow]not readable, left out:[/yellow] {escape(skipped)}")
        return {"workdir": workfiles.manifest_entry(target, archived, workdir)}

    conn = await connect(nats, name="longhaul-backup")
    try:
        with RichProgress(console) as progress:
            saved, _ = await back_up(conn, directory, progress=progress, extra=files)
    finally:
        await conn.close()
    return saved


def backup(
    directory: Directory,
    workdir: Workdir = None,
    no_workdir: Annotated[
        bool, typer.Option("--no-workdir", help="leave the working files out")
    ] = False,
) -> None:
    """Save the whole deployment into DIR (new or empty) while it runs: every stream of its
    namespace (events, buckets, objects) and the agents' working files."""
    config = load_config()
    source = None if no_workdir else (workdir or default_workdir(config)).resolve()
    if source is not None and not source.is_dir():
        errors.print(
            f"[red]backup failed:[/red] no working files at {source}: pass --workdir (where "
            "the executors work) or --no-workdir"
        )
        raise typer.Exit(1)
    try:
        saved = asyncio.run(_backup(config.nats, directory.resolve(), source))
    except BackupError as exc:
        errors.print(f"[red]backup failed:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    console.print(_table(f"backed up into {directory}", saved))


async def restore_deployment(
    nats: NatsConfig,
    directory: Path,
    workdir: Path,
    *,
    replace: bool = False,
    force: bool = False,
    out: Console = console,
    seen_running: list[str] | None = None,
) -> list[Saved]:
    """Check the backup whole, then recreate its streams and unpack its working files into
    ``workdir`` (refused when it holds files, unless ``replace``); ``BackupError`` says why
    not, before anything changed."""
    with RichProgress(out) as progress:
        progress.begin(f"checking {directory}", None)
        manifest = await asyncio.to_thread(read_manifest, directory)
        progress.end(f"{directory}: complete, every file matches its SHA-256")
        work = manifest.get("workdir")
        if work and not replace and await asyncio.to_thread(_holds_files, workdir):
            raise BackupError(
                f"the working directory {workdir} holds files already: restore into a new "
                "deployment, or pass --replace"
            )
        conn = await connect(nats, name="longhaul-restore")
        try:
            saved = await restore_all(
                conn,
                directory,
                manifest=manifest,
                replace=replace,
                force=force,
                progress=progress,
                seen_running=seen_running or [],
            )
        finally:
            await conn.close()
        if work:
            unpacked = await asyncio.to_thread(
                workfiles.extract, directory / WORKDIR_ARCHIVE, workdir, progress=progress
            )
            for skipped in unpacked.skipped:
                out.print(f"[yellow]not restored:[/yellow] {escape(skipped)}")
    return saved


def restore(
    directory: Directory,
    workdir: Workdir = None,
    replace: Annotated[
        bool,
        typer.Option(help="delete the deployment's streams first (its services stopped)"),
    ] = False,
    force: Annotated[
        bool, typer.Option(help="--replace even though its services seem to be running")
    ] = False,
) -> None:
    """Recreate a backup's streams and working files (checked whole first); start the
    services afterwards: waiting traces wait again, running ones are taken up."""
    config = load_config()
    target = (workdir or default_workdir(config)).resolve()
    try:
        supervisor = supervisor_running(config.data_dir.resolve(), config.nats.url)
        saved = asyncio.run(
            restore_deployment(
                config.nats,
                directory,
                target,
                replace=replace,
                force=force,
                seen_running=supervisor,
            )
        )
    except BackupError as exc:
        errors.print(f"[red]restore failed:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    console.print(_table(f"restored from {directory}", saved))
