"""Start a task: check what a create body asks for (its phases' operator checks and models)
and build its ``task_created``, the one way ``/api/tasks``, ``/api/runs``, schedules and
triggers start a plan job."""

from __future__ import annotations

from typing import Any

from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev
from longhaul.gateway.errors import ApiError
from longhaul.gateway.schemas.tasks import CreateTaskRequest
from longhaul.gateway.verification import verification_problems
from longhaul.llm.registry import check_model_string

TASK_FIELDS = {"goal", "mode", "options", "review", "max_tokens", "max_cost"}
"""What of a create body goes on ``task_created`` as it is."""


def check_task_options(config: LonghaulConfig, options: dict[str, Any]) -> None:
    """Phases given by the client may name operator checks, never carry commands, and name
    only models a run could use (no script outside models.scripted_dir): else 422."""
    phases = options.get("phases")
    phases = (
        [phase for phase in phases if isinstance(phase, dict)] if isinstance(phases, list) else []
    )
    errors = [
        f"options.phases[{index}].{error}"
        for index, phase in enumerate(phases)
        for error in verification_problems(phase.get("verification"), config.verifier.commands)
    ]
    if errors:
        raise ApiError(422, "invalid_verification", "; ".join(errors))
    for model in _models(options, phases):
        try:
            check_model_string(model, config.models)
        except ValueError as exc:
            raise ApiError(422, "invalid_model", str(exc)) from None


def _models(options: dict[str, Any], phases: list[dict[str, Any]]) -> list[str]:
    """Every model string a task's options name: the task's, its phases', their
    competitors' and their judges'."""
    found: list[Any] = [options.get("model")]
    for phase in phases:
        found.append(phase.get("model"))
        competitors = phase.get("competitors")
        if isinstance(competitors, list):
            found += [c.get("model") for c in competitors if isinstance(c, dict)]
        verification = phase.get("verification")
        judge = verification.get("judge") if isinstance(verification, dict) else None
        if isinstance(judge, dict):
            found.append(judge.get("model"))
    return [model for model in found if isinstance(model, str)]


def task_creation(config: LonghaulConfig, body: CreateTaskRequest) -> ev.TaskCreated:
    """The ``task_created`` event a create body asks for (phases' checks and models checked):
    the one way every surface (this API, schedules, triggers) starts a task."""
    check_task_options(config, body.options)
    return ev.TaskCreated(**body.model_dump(include=TASK_FIELDS))
