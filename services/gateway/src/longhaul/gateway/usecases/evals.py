"""Eval runs (``/api/evals``): what tags a run's trace and what a list of traces leaves out.

An eval's run carries its task's check and library checks on its eval tag (the verifier
scores them once it completes) and whether it notifies: an eval's runs are measurements, so
they send no ``run.*`` notification unless the eval asked (``longhaul eval --notify``).
"""

from __future__ import annotations

from longhaul.core.index import TraceIndexEntry
from longhaul.domain import evals
from longhaul.domain import events as ev


def run_tag(
    record: evals.EvalRecord, suite: evals.Suite, task: evals.EvalTask, repeat: int
) -> ev.EvalTag:
    """The eval tag of one run's trace."""
    return ev.EvalTag(
        eval_id=record.eval_id,
        task=task.id,
        repeat=repeat,
        check=task.check,
        checks=[c.model_dump(mode="json", exclude_defaults=True) for c in suite.checks_of(task)],
        notify=record.notify,
    )


def rubric_models(suite: evals.Suite) -> list[tuple[str, str]]:
    """(task id, model) of every rubric that names its own model: each must be one a run
    could use, or the eval is refused before it starts."""
    return [
        (task.id, check.model)
        for task in suite.tasks
        for check in suite.checks_of(task)
        if check.model is not None
    ]


def not_an_eval_run(entry: TraceIndexEntry) -> bool:
    """What a list of traces keeps unless asked for evals too (``GET /api/traces?evals=false``)."""
    return entry.eval_id is None
