"""The ``longhaul`` command."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console

from longhaul.core.logs import configure_logging
from longhaul.core.nats_server import NatsServerError

app = typer.Typer(no_args_is_help=True, help="longhaul: durable long-horizon LLM agents.")
console = Console()


@app.callback()
def cli() -> None:
    """longhaul: durable long-horizon LLM agents over NATS JetStream."""


@app.command()
def up(
    host: str = typer.Option("127.0.0.1", help="gateway bind address"),
    port: int = typer.Option(8080, help="gateway port"),
    data_dir: Path = typer.Option(Path(".longhaul"), help="where embedded JetStream keeps data"),
    executors: int = typer.Option(1, min=1, help="executor processes"),
    nats_url: str | None = typer.Option(None, help="use this NATS server instead of embedding one"),
    nats_port: int = typer.Option(4222, help="port of the embedded NATS server"),
) -> None:
    """Start the embedded JetStream server and every service; Ctrl-C stops all."""
    from longhaul.cli.up import run_up

    configure_logging("up")
    try:
        asyncio.run(
            run_up(host=host, port=port, data_dir=data_dir, executors=executors,
                   nats_url=nats_url, nats_port=nats_port, console=console)
        )
    except NatsServerError as exc:
        console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc


def main() -> None:
    app()


if __name__ == "__main__":
    main()
