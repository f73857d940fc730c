"""The ``longhaul`` command: ``up`` runs the stack; the other commands talk to a gateway
(``--url`` / ``LONGHAUL_URL``, ``--api-key`` / ``LONGHAUL_API_KEY``)."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated

import typer
from longhaul.cli import (
    backup,
    eval_commands,
    experiences,
    inbox,
    keys,
    schedules,
    tasks,
    traces,
    triggers,
    usage,
)
from longhaul.cli.context import Target, console, errors, execute
from longhaul.cli.init import next_steps, write_starter
from longhaul.cli.run import read_files, run_task
from longhaul.cli.settings_flags import setting_option
from longhaul.client import API_KEY_ENV, DEFAULT_URL, URL_ENV, AsyncClient
from longhaul.core.backup import BackupError
from longhaul.core.config import CONFIG_ERROR_EXIT
from longhaul.core.logs import configure_logging
from longhaul.core.nats_server import NatsServerError
from longhaul.domain.config import ConfigError
from rich.markup import escape

app = typer.Typer(no_args_is_help=True, help="longhaul: durable long-horizon LLM agents.")
app.add_typer(traces.app, name="traces")
app.add_typer(tasks.app, name="tasks")
app.add_typer(schedules.app, name="schedules")
app.add_typer(triggers.app, name="triggers")
app.add_typer(experiences.app, name="experiences")
app.add_typer(keys.app, name="keys")
app.add_typer(eval_commands.app, name="eval")
app.add_typer(inbox.app, name="inbox")
app.command("usage")(usage.usage)
app.command("backup")(backup.backup)
app.command("restore")(backup.restore)


@app.callback()
def options(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(envvar=URL_ENV, help="gateway URL")] = DEFAULT_URL,
    api_key: Annotated[
        str | None,
        typer.Option(envvar=API_KEY_ENV, help="gateway API key", show_default=False),
    ] = None,
) -> None:
    ctx.obj = Target(url=url, api_key=api_key)


@app.command()
def up(
    host: Annotated[str, typer.Option(help="gateway bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, help="gateway port (0: a free one)")] = 8080,
    data_dir: Annotated[
        Path, typer.Option(help="JetStream data, logs and the agents' workdir")
    ] = Path(".longhaul"),
    executors: Annotated[int, typer.Option(min=1, help="executor processes")] = 1,
    nats_url: Annotated[
        str | None, typer.Option(help="use this NATS server instead of embedding one")
    ] = None,
    nats_port: Annotated[
        int, typer.Option(min=0, help="port of the embedded NATS server (0: a free one)")
    ] = 4222,
    restore: Annotated[
        Path | None,
        typer.Option(
            help="restore this backup (longhaul backup) before the services start",
            show_default=False,
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option(help="with --restore: replace what the data dir holds already")
    ] = False,
) -> None:
    """Start the embedded JetStream server and every service; Ctrl-C stops all."""
    from longhaul.cli.up import prepare_dirs, run_up

    # Only warnings (child restarts) from `up` itself: the banner is the interface.
    configure_logging("up", level=os.environ.get("LONGHAUL_LOG_LEVEL", "WARNING"))
    data_dir, work_dir = prepare_dirs(data_dir)
    try:
        asyncio.run(
            run_up(
                host=host,
                port=port,
                data_dir=data_dir,
                work_dir=work_dir,
                executors=executors,
                nats_url=nats_url,
                nats_port=nats_port,
                console=console,
                restore=restore,
                replace=replace,
            )
        )
    except BackupError as exc:
        errors.print(f"[red]restore failed:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    except NatsServerError as exc:
        errors.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    except ConfigError as exc:
        # One line, however long: the key or module and the reason.
        errors.print(f"[red]invalid configuration:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None


@app.command()
def run(
    ctx: typer.Context,
    task: Annotated[str, typer.Argument(help="what the agent should do")],
    mode: Annotated[
        str,
        typer.Option(
            help="auto: the gateway routes by estimated complexity; trace: one agent; "
            "task: a planned team"
        ),
    ] = "auto",
    model: Annotated[
        str | None, setting_option("model", help="provider:model (default: the gateway's)")
    ] = None,
    preset: Annotated[str | None, setting_option("preset", help="agent preset")] = None,
    tool: Annotated[
        list[str] | None,
        setting_option("tools", "--tool", help="offer only these tools (repeatable)"),
    ] = None,
    name: Annotated[str | None, typer.Option(help="a name for the trace")] = None,
    max_iterations: Annotated[
        int | None, setting_option("max_iterations", help="model calls the run may make")
    ] = None,
    max_tokens: Annotated[
        int | None,
        setting_option("max_tokens", help="tokens the run (a task: its step traces) may use"),
    ] = None,
    max_cost: Annotated[
        float | None,
        setting_option("max_cost", help="dollars the run (a task: its step traces) may spend"),
    ] = None,
    review: Annotated[
        bool | None,
        typer.Option("--review/--no-review", help="a task waits for its plan to be approved"),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="stream until it ends")
    ] = True,
    file: Annotated[
        list[Path] | None,
        typer.Option(
            "--file",
            "-f",
            exists=True,
            dir_okay=False,
            readable=True,
            help="put this file into the agent's working directory first (repeatable; "
            "makes the run one agent)",
        ),
    ] = None,
) -> None:
    """Submit a goal (one agent or a planned team, as the gateway routes it) and stream its
    progress; prints the answer."""
    files = read_files(file or [])

    async def command(client: AsyncClient) -> int:
        return await run_task(
            client,
            task,
            mode=mode,
            model=model,
            preset=preset,
            tools=tool or None,
            name=name,
            max_iterations=max_iterations,
            max_tokens=max_tokens,
            max_cost=max_cost,
            review=review,
            follow=follow,
            files=files,
        )

    execute(ctx, command)


@app.command()
def init(
    directory: Annotated[
        Path, typer.Argument(help="where to write longhaul.yaml and my_tools.py")
    ] = Path("."),
    force: Annotated[bool, typer.Option("--force", help="overwrite files already there")] = False,
) -> None:
    """Write a commented longhaul.yaml (model, keys, a preset) and a tool module to start
    from, and say what to run next."""
    try:
        written = write_starter(directory, secrets.token_urlsafe(24), force=force)
    except FileExistsError as exc:
        errors.print(f"[red]already there:[/red] {escape(str(exc))} (--force overwrites)")
        raise typer.Exit(1) from None
    for path in written:
        console.print(f"wrote {escape(str(path))}")
    console.print(escape(next_steps(directory)), soft_wrap=True)


@app.command("nats-auth")
def nats_auth_files(
    out: Annotated[Path, typer.Option(help="directory for the generated files")] = Path(
        "deploy/secrets"
    ),
    namespace: Annotated[str, typer.Option(help="the installation's nats.namespace")] = "",
) -> None:
    """Write NATS users for a deployment: the server's authorization file and one env file
    per service (reuses existing passwords in --out)."""
    from longhaul.core.nats_auth import write_deployment
    from longhaul.domain.names import Names

    for path in write_deployment(out, Names(namespace)):
        console.print(f"wrote {path}")
    console.print("mount nats-auth.conf into nats-server (-c) and give each service its .env")


@app.command("mcp")
def mcp_stdio(ctx: typer.Context) -> None:
    """Serve the gateway's MCP tools (/mcp) on stdin/stdout, for desktop MCP clients."""
    # imported here: the MCP SDK is a second of every other command's start
    from longhaul.cli.mcp_bridge import serve_stdio

    target: Target = ctx.obj
    try:
        asyncio.run(serve_stdio(target.url, target.api_key))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@app.command()
def replay(ctx: typer.Context, trace_id: Annotated[str, typer.Argument(help="trace id")]) -> None:
    """Print the event timeline of a trace from its log."""
    traces.replay(ctx, trace_id)


GLOBAL_OPTIONS = ("--url", "--api-key")


def global_options_first(args: list[str]) -> list[str]:
    """``args`` with the global options moved before the command, so that
    ``longhaul keys erase OWNER --api-key K`` works like ``longhaul --api-key K keys erase
    OWNER`` (Typer only reads them before the first command). ``--`` ends the options."""
    moved: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest.extend(args[index:])
            break
        if arg in GLOBAL_OPTIONS and index + 1 < len(args):
            moved.extend(args[index : index + 2])
            index += 2
            continue
        if arg.split("=", 1)[0] in GLOBAL_OPTIONS and "=" in arg:
            moved.append(arg)
        else:
            rest.append(arg)
        index += 1
    return moved + rest


def main() -> None:
    app(args=global_options_first(sys.argv[1:]))


if __name__ == "__main__":
    main()
