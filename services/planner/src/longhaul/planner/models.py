"""The models the planner calls (decomposition, reflection, replanning, merging).

An offline model — ``scripted:auto``, which invents schema-shaped answers — is treated as no
model at all, so the planner takes its rule-based paths instead of acting on made-up plans or
verdicts. A ``scripted:<file>`` model has a script and counts as a real one (tests), except as
the utility model: its review of a plan would be a script's, not a judgement.
"""

from __future__ import annotations

import logging

from longhaul.domain.config import ModelsConfig
from longhaul.llm.registry import ModelRegistry, is_offline, is_scripted
from longhaul.llm.types import Model

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 180.0


class PlannerModels:
    def __init__(self, registry: ModelRegistry, config: ModelsConfig) -> None:
        self.registry = registry
        self.config = config

    def planner(self) -> Model | None:
        """The planner role model, or ``None`` when it is offline or cannot be built."""
        return self.usable(self.config.for_role("planner"))

    def utility(self) -> Model | None:
        """The utility role model (the plan's second opinion), or ``None`` when offline or
        scripted: a script's verdict on a plan is no review."""
        model_string = self.config.for_role("utility")
        return None if is_scripted(model_string) else self.usable(model_string)

    def usable(self, model_string: str | None) -> Model | None:
        if not model_string or is_offline(model_string):
            return None
        try:
            return self.registry.resolve(model_string)
        except ValueError as exc:
            log.warning("model %s unavailable, using rules instead: %s", model_string, exc)
            return None
