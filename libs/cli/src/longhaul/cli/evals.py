"""``longhaul eval SUITE``: run a suite's tasks against models, score them, compare.

Everything goes through :mod:`longhaul.client`, so it works against a local ``longhaul up``
and a remote gateway alike: the gateway registers the eval (``POST /api/evals``), starts
each (task, model, repeat) as a trace tagged with the eval's id (the task's files written
first), the verifier runs each task's ``check`` in the run's working directory once the
trace completes, and this command waits, matches ``answer`` against the final answer,
records the score (``PUT /api/evals/{id}/runs``) and prints the table per model. An
interrupted eval continues with ``--resume EVAL_ID``: runs already scored are not run
again, a run started but not scored is waited for, not started twice. ``--replay EVAL_ID``
runs the suite again with every model call answered from that eval's recorded runs, reports
where each run diverged from its record, and compares against it as the baseline.

The exit code gates CI as promptfoo's does: 1 when the pass rate of all runs is below
``--threshold`` (1.0 by default: any failed run) or anything regressed against a baseline.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from longhaul.cli.chaos import Faults
from longhaul.cli.context import console, errors
from longhaul.cli.listing import Format
from longhaul.client import AsyncClient, LonghaulError, NotFound
from longhaul.client.models import CheckVerdict, Eval, EvalRun, Trace
from longhaul.domain import evals
from longhaul.domain.replay import divergence
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

CHECK_WAIT_S = evals.CHECK_TIMEOUT_S + 60.0
"""How long a completed run's check may take to appear (its own timeout, and slack)."""
CHECK_POLL_S = (0.1, 2.0)
USAGE_EXIT = 2


class EvalUsageError(Exception):
    """A suite, baseline or option that cannot run (exit 2)."""


@dataclass(frozen=True)
class Options:
    models: list[str]
    repeat: int = 1
    concurrency: int = 4
    json_out: Path | None = None
    baseline: Path | None = None
    resume: str | None = None
    replay: str | None = None
    tasks: Sequence[str] = ()
    limit: int | None = None
    threshold: float = 1.0
    notify: bool = False
    output: Format = Format.table


def read_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EvalUsageError(f"baseline {path}: {exc}") from None
    if not isinstance(data, dict) or not {"summary", "runs"} <= set(data):
        raise EvalUsageError(f"baseline {path}: not the JSON of `longhaul eval --json`")
    return data


async def _finished(client: AsyncClient, trace_id: str) -> tuple[Trace, list[str]]:
    """The run's trace once it ended; one that waits for a person is stopped (an eval has
    nobody to answer it) and fails."""
    reasons: list[str] = []
    while True:
        trace = await client.wait(trace_id)
        if trace.is_final:
            return trace, reasons
        if trace.needs_client and not reasons:
            reasons.append(f"the run waited for a person ({trace.wait_reason}) and was stopped")
            await client.stop(trace_id)


async def _check(
    client: AsyncClient, eval_id: str, trace_id: str
) -> tuple[bool, str, list[CheckVerdict]]:
    """The check's outcome and the library checks' verdicts, polled until the verifier filed
    them."""
    delay, most = CHECK_POLL_S
    deadline = time.monotonic() + CHECK_WAIT_S
    while True:
        try:
            outcome = await client.eval_check(eval_id, trace_id)
        except NotFound:
            if time.monotonic() > deadline:
                message = f"no check outcome within {CHECK_WAIT_S:g}s (is a verifier running?)"
                return False, message, []
            await asyncio.sleep(delay)
            delay = min(delay * 2, most)
            continue
        return outcome.passed, outcome.log, outcome.checks


async def diverged(client: AsyncClient, recorded_id: str, replayed_id: str) -> str | None:
    """Where a replayed run first did something else than the run it replays."""
    before = await client.messages(recorded_id)
    after = await client.messages(replayed_id)
    return divergence(before.messages, after.messages)


async def score(
    client: AsyncClient,
    eval_id: str,
    task: evals.EvalTask,
    model: str,
    repeat: int,
    faults: Faults,
    recorded: dict[tuple[str, str, int], str] | None = None,
    *,
    library: bool = False,
) -> dict[str, Any]:
    """Run one (task, model, repeat) to its end and score it; the ``EvalRun`` fields.
    ``recorded``: on a replay, the recorded run's trace per (task, model, repeat);
    ``library``: the task has library checks (the verifier files their verdicts)."""
    accepted = await client.start_eval_run(eval_id, task.id, model, repeat)
    trace_id = accepted.trace_id
    await faults.started(trace_id)
    try:
        trace, reasons = await _finished(client, trace_id)
    finally:
        await faults.ended(trace_id)
    if trace.status != "completed":
        reasons.append(
            f"the trace {trace.status}: {trace.error or trace.stop_reason or ''}".strip()
        )
    verdicts: list[CheckVerdict] = []
    if trace.status == "completed":
        if task.check is not None or library:
            passed, log, verdicts = await _check(client, eval_id, trace_id)
            if not passed:
                reasons.append(f"check failed: {log[-2000:]}")
        reasons += [
            f"{v.check} failed: {v.detail}"[:4000] for v in verdicts if not (v.passed or v.skipped)
        ]
        if task.answer is not None and not re.search(task.answer, trace.summary or ""):
            reasons.append(f"the answer does not match {task.answer!r}")
    record_id = (recorded or {}).get((task.id, model, repeat))
    return {
        "task": task.id,
        "model": model,
        "repeat": repeat,
        "trace_id": trace_id,
        "status": trace.status,
        "passed": not reasons,
        "tokens": trace.totals.tokens,
        "cost": trace.totals.cost,
        "duration_s": round(max(0.0, trace.updated_at - trace.created_at), 3),
        "model_calls": trace.run_usage.iterations,
        "recovered": trace_id in faults.hit,
        "reasons": reasons,
        "diverged": None if record_id is None else await diverged(client, record_id, trace_id),
        "output": (trace.summary or "")[: evals.MAX_OUTPUT_CHARS] or None,
        "checks": [v.model_dump() for v in verdicts],
        "ended_at": trace.updated_at,
    }


def report(record: Eval, runs: Iterable[EvalRun]) -> dict[str, Any]:
    """The ``--json`` document: eval_id, suite, summary per model, runs."""
    ordered = sorted(runs, key=lambda r: (r.model, r.task, r.repeat))
    results = [evals.RunResult(**r.model_dump(include=_RUN_FIELDS)) for r in ordered]
    return {
        "eval_id": record.eval_id,
        "suite": record.suite_name,
        "summary": evals.summarize(results),
        "runs": [r.model_dump(include=_RUN_FIELDS) for r in ordered],
    }


_RUN_FIELDS = set(EvalRun.model_fields)


def table(document: dict[str, Any]) -> Table:
    """One row per model: the pass rate with its interval, tokens, cost, time, calls."""
    table = Table(title=f"eval {document['eval_id']} · {document['suite']}")
    for column in (
        "model",
        "passed",
        "pass rate (95% CI)",
        "tokens p50/p90",
        "cost",
        "wall s p50/p90",
        "calls p50/p90",
        "recovered",
    ):
        if column == "model":  # never cut: the other columns wrap instead
            width = max(map(len, document["summary"]), default=0)
            table.add_column(column, no_wrap=True, min_width=max(width, len(column)))
        else:
            table.add_column(column, justify="right", overflow="fold")
    for model, s in document["summary"].items():
        table.add_row(
            escape(model),
            f"{s['passed']}/{s['total']}",
            f"{s['pass_rate']:.0%} [{s['ci_low']:.0%}, {s['ci_high']:.0%}]",
            f"{s['tokens_median']:g}/{s['tokens_p90']:g}",
            f"${s['cost_total']:.4f}",
            f"{s['duration_median_s']:.1f}/{s['duration_p90_s']:.1f}",
            f"{s['model_calls_median']:g}/{s['model_calls_p90']:g}",
            str(s["recovered"]),
        )
    return table


async def _open(client: AsyncClient, suite: evals.Suite, options: Options) -> Eval:
    payload = suite.model_dump(mode="json", exclude_unset=True)
    if options.replay is not None:
        return await client.create_eval(payload, replay_of=options.replay, notify=options.notify)
    if options.resume is not None:
        record = await client.get_eval(options.resume)
        if evals.parse_suite(record.suite) != suite:
            errors.print("[yellow]note:[/yellow] the suite file changed; resuming the stored one")
        return record
    models = options.models or [str((await client.info()).default_model)]
    return await client.create_eval(payload, models, repeat=options.repeat, notify=options.notify)


async def run_eval(
    client: AsyncClient,
    suite_path: Path,
    options: Options,
    *,
    during: Callable[[Faults], Any] | None = None,
    on_end: Callable[[], None] | None = None,
) -> int:
    """Exit code: 0 done, 1 the pass rate is below ``--threshold`` or something regressed
    against ``--baseline``, 2 bad input. ``during``: started beside the runs (``--chaos``),
    cancelled when they end, then ``on_end``."""
    try:
        suite = evals.load_suite(suite_path).only(options.tasks, options.limit)
        baseline = read_baseline(options.baseline) if options.baseline else None
    except (evals.SuiteError, EvalUsageError) as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}")
        return USAGE_EXIT
    try:
        return await _run(client, suite, options, baseline, during, on_end)
    except* LonghaulError as group:  # a run's error, raised out of the task group
        raise group.exceptions[0] from None


async def _run(
    client: AsyncClient,
    suite: evals.Suite,
    options: Options,
    baseline: dict[str, Any] | None,
    during: Callable[[Faults], Any] | None,
    on_end: Callable[[], None] | None,
) -> int:
    out = console if options.output is Format.table else errors  # stdout is for the data
    record = await _open(client, suite, options)
    suite = evals.parse_suite(record.suite)
    if options.resume is not None and (options.tasks or options.limit is not None):
        try:
            suite = suite.only(options.tasks, options.limit)
        except evals.SuiteError as exc:
            errors.print(f"[red]error:[/red] {escape(str(exc))}")
            return USAGE_EXIT
    recorded: dict[tuple[str, str, int], str] | None = None
    if record.replay_of is not None:
        replayed = await client.get_eval(record.replay_of)
        recorded = {(r.task, r.model, r.repeat): r.trace_id for r in replayed.runs}
        baseline = baseline or report(replayed, replayed.runs)
        out.print(f"replaying eval [bold]{record.replay_of}[/bold]: no model is called")
    done = {(r.task, r.model, r.repeat) for r in record.runs}
    todo = [
        (task, model, k)
        for model in record.models
        for task in suite.tasks
        for k in range(record.repeat)
        if (task.id, model, k) not in done
    ]
    out.print(
        f"eval [bold]{record.eval_id}[/bold]: {len(suite.tasks)} tasks x "
        f"{len(record.models)} models x {record.repeat}; {len(done)} already scored"
    )
    faults = Faults()
    gate = asyncio.Semaphore(max(1, options.concurrency))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[passed]} passed"),
        TimeElapsedColumn(),
        console=out,
        transient=False,
    ) as progress:
        bars = {
            model: progress.add_task(
                escape(model),
                total=len(suite.tasks) * record.repeat,
                completed=sum(1 for (_, m, _) in done if m == model),
                passed=sum(1 for r in record.runs if r.model == model and r.passed),
            )
            for model in record.models
        }

        async def one(task: evals.EvalTask, model: str, k: int) -> None:
            async with gate:
                library = bool(suite.checks_of(task))
                run = await score(
                    client, record.eval_id, task, model, k, faults, recorded, library=library
                )
                await client.record_eval_run(record.eval_id, run)
            bar = bars[model]
            passed = progress.tasks[bar].fields["passed"] + run["passed"]
            progress.update(bar, advance=1, passed=passed)

        side = asyncio.create_task(during(faults)) if during is not None else None
        try:
            async with asyncio.TaskGroup() as group:
                for task, model, k in todo:
                    group.create_task(one(task, model, k))
        finally:
            if side is not None:
                side.cancel()
                await asyncio.gather(side, return_exceptions=True)
                if on_end is not None:
                    on_end()
    final = await client.get_eval(record.eval_id)
    document = report(final, final.runs)
    out.print(table(document))
    for run in final.runs:
        if not run.passed:
            why = "; ".join(run.reasons)[:300]
            out.print(f"  [red]✗[/red] {escape(run.model)} {run.task}#{run.repeat}: {escape(why)}")
    for run in final.runs:
        if run.diverged:
            out.print(
                f"  [yellow]diverged[/yellow] {escape(run.model)} {run.task}#{run.repeat}: "
                f"{escape(run.diverged)}"
            )
    if options.json_out is not None:
        options.json_out.write_text(json.dumps(document, indent=2) + "\n")
    if options.output is Format.json:
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    elif options.output is Format.jsonl:
        sys.stdout.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in document["runs"])
    failed = below(document, options.threshold)
    if failed:
        out.print(f"[red]below the threshold:[/red] {escape(failed)}")
    if baseline is None:
        return 1 if failed else 0
    regressed = evals.regressions(document, baseline, spend=record.replay_of is None)
    for line in regressed:
        out.print(f"[red]regression:[/red] {escape(line)}")
    if not regressed:
        out.print("no regression against the baseline")
    return 1 if regressed or failed else 0


def below(document: dict[str, Any], threshold: float) -> str | None:
    """Why the eval's pass rate (of all its runs) is below ``threshold``; ``None`` if not."""
    runs = document["runs"]
    passed = sum(bool(r["passed"]) for r in runs)
    if not runs or passed / len(runs) >= threshold:
        return None
    return f"{passed}/{len(runs)} passed ({passed / len(runs):.0%}), under {threshold:.0%}"
