"""Which models the planner asks: a scripted utility model never reviews a plan."""

from __future__ import annotations

from pathlib import Path

from longhaul.domain.config import ModelsConfig
from longhaul.llm.registry import ModelRegistry
from longhaul.planner.models import PlannerModels


def test_a_scripted_model_never_reviews_a_plan_but_may_plan(tmp_path: Path) -> None:
    script = tmp_path / "plan.yaml"
    script.write_text("- content: '{}'\n")
    config = ModelsConfig(
        default="scripted:demo",
        roles={"planner": f"scripted:{script.name}", "utility": f"scripted:{script.name}"},
        scripted_dir=tmp_path,
    )
    models = PlannerModels(ModelRegistry(config), config)
    assert models.utility() is None
    assert models.planner() is not None
    demo = ModelsConfig(default="scripted:demo")
    assert PlannerModels(ModelRegistry(demo), demo).utility() is None
