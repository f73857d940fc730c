"""``longhaul eval SUITE …`` (run, score, compare, replay) and ``longhaul eval add``.

``eval`` is a group whose default command is ``run``: ``longhaul eval suite.yaml`` and
``longhaul eval run suite.yaml`` are the same, and ``longhaul eval add`` turns a recorded
run into a task of a suite file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from longhaul.cli.context import console, errors, execute
from longhaul.cli.listing import Format, Output
from longhaul.client import AsyncClient
from longhaul.domain import evals
from rich.markup import escape
from typer.core import TyperGroup

USAGE_EXIT = 2


class SuiteOrCommand(TyperGroup):
    """A group that runs ``run`` when its first argument is not one of its commands."""

    default_command = "run"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # click's or typer's own
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=SuiteOrCommand,
    no_args_is_help=True,
    help="Evals: `longhaul eval SUITE` runs a suite (same as `eval run`); `eval add` adds a "
    "recorded run to one.",
)


@app.command("run")
def eval_suite(
    ctx: typer.Context,
    suite: Annotated[
        Path, typer.Argument(help="the suite: YAML, or a JSONL/CSV dataset (one task per row)")
    ],
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model", help="provider:model to run it on (repeatable; default: the gateway's)"
        ),
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, max=100, help="runs of each task per model")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="runs at a time")] = 4,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="write the results as JSON here")
    ] = None,
    output: Output = Format.table,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", "-t", help="run only this task id (repeatable)"),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="run only the first N tasks")
    ] = None,
    threshold: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="exit 1 when the pass rate of all runs is below this (default 1.0: any "
            "failed run; 0 never)",
        ),
    ] = 1.0,
    notify: Annotated[
        bool, typer.Option("--notify", help="let the runs send notifications (default: none)")
    ] = False,
    baseline: Annotated[
        Path | None,
        typer.Option(help="an earlier --json: mark regressions, exit 1 if anything regressed"),
    ] = None,
    resume: Annotated[
        str | None, typer.Option(help="continue this eval id; scored runs are not run again")
    ] = None,
    replay: Annotated[
        str | None,
        typer.Option(
            help="replay this eval id: every model call answered from its recorded runs (no "
            "tokens); reports where a run diverged, exit 1 if a task it passed now fails"
        ),
    ] = None,
    chaos: Annotated[
        str | None,
        typer.Option(
            help="executor[:N]: SIGKILL a random executor of the local `longhaul up` N times "
            "(default 2) while the suite runs"
        ),
    ] = None,
    data_dir: Annotated[
        Path, typer.Option(help="--chaos: the data dir of that `longhaul up`")
    ] = Path(".longhaul"),
) -> None:
    """Run a suite of tasks on models, score each run, print a table per model (-o json: the
    results on stdout). Exit 1 when the pass rate is under --threshold or a run regressed."""
    from longhaul.cli.chaos import Chaos, ChaosError, local_stack, parse_chaos
    from longhaul.cli.evals import Options, run_eval

    if replay is not None and (model or resume is not None):
        errors.print(
            "[red]error:[/red] --replay takes the recorded eval's models; no --model/--resume"
        )
        raise typer.Exit(USAGE_EXIT)
    injector = None
    if chaos is not None:
        try:
            injector = Chaos(local_stack(data_dir, ctx.obj.url), parse_chaos(chaos))
        except ChaosError as exc:
            errors.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(USAGE_EXIT) from None

    options = Options(
        models=model or [],
        repeat=repeat,
        concurrency=concurrency,
        json_out=json_out,
        baseline=baseline,
        resume=resume,
        replay=replay,
        tasks=task or [],
        limit=limit,
        threshold=threshold,
        notify=notify,
        output=output,
    )

    async def command(client: AsyncClient) -> int:
        if injector is None:
            return await run_eval(client, suite, options)
        return await run_eval(client, suite, options, during=injector.run, on_end=injector.report)

    execute(ctx, command)


def _suite_data(path: Path) -> dict[str, Any]:
    """The suite file's data, or a new suite named after the file."""
    if not path.exists():
        return {"name": path.stem, "tasks": []}
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise evals.SuiteError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise evals.SuiteError(f"{path}: not a suite (a mapping with a list of tasks)")
    return data


def _dumped(task: dict[str, Any]) -> str:
    return yaml.safe_dump([task], sort_keys=False, allow_unicode=True, width=100)


def _appended(text: str, task: dict[str, Any]) -> str | None:
    """``text`` with ``task`` appended to its task list as text, so the file's comments and
    layout stay; ``None`` when the list is not the file's last block."""
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode) or not root.value:
        return None
    key, tasks = root.value[-1]
    if key.value != "tasks" or not isinstance(tasks, yaml.SequenceNode) or tasks.flow_style:
        return None
    indent = tasks.value[0].start_mark.column - 2 if tasks.value else 0
    if indent < 0:
        return None
    return text.rstrip("\n") + "\n" + textwrap.indent(_dumped(task), " " * indent)


def _written(path: Path, data: dict[str, Any], task: dict[str, Any]) -> None:
    text = path.read_text() if path.exists() else ""
    appended = _appended(text, task) if text and data["tasks"][:-1] else None
    path.write_text(
        appended
        if appended is not None
        else yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    )


@app.command("add")
def add_task(
    ctx: typer.Context,
    suite: Annotated[Path, typer.Argument(help="the suite file (YAML; created if missing)")],
    trace_id: Annotated[str, typer.Argument(help="the recorded run (t_…)")],
    check: Annotated[
        str | None, typer.Option(help="shell check in the run's directory; exit 0 = pass")
    ] = None,
    answer: Annotated[str | None, typer.Option(help="regex the final answer must match")] = None,
    task_id: Annotated[str | None, typer.Option("--id", help="the task's id")] = None,
) -> None:
    """Turn a recorded run into a task of SUITE: its first messages, the files it started
    with, its preset and limits, and the check you give."""
    try:
        data = _suite_data(suite)
    except evals.SuiteError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(USAGE_EXIT) from None

    async def command(client: AsyncClient) -> int:
        made = await client.task_from_trace(trace_id, task_id=task_id, check=check, answer=answer)
        task = made.task
        if any(t.get("id") == task["id"] for t in data["tasks"] if isinstance(t, dict)):
            errors.print(
                f"[red]error:[/red] {escape(str(suite))} already has a task {task['id']!r} "
                "(choose another with --id)"
            )
            return USAGE_EXIT
        data["tasks"].append(task)
        try:
            evals.parse_suite(data)
        except evals.SuiteError as exc:
            errors.print(f"[red]error:[/red] the suite would not be valid:\n{escape(str(exc))}")
            return USAGE_EXIT
        _written(suite, data, task)
        console.print(f"added task [bold]{escape(task['id'])}[/bold] to {escape(str(suite))}")
        for name in made.skipped_files:
            console.print(f"  [yellow]not added:[/yellow] {escape(name)} (not a text file)")
        if check is None and answer is None:
            console.print(
                "  [yellow]note:[/yellow] no --check or --answer: it passes if it completes"
            )
        return 0

    execute(ctx, command)
