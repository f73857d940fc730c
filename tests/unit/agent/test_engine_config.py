"""An engine built from longhaul.yaml's sections: user presets, project skills, the pipeline."""

from __future__ import annotations

from pathlib import Path

from longhaul.agent import AgentEnv, Engine
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.skills import SkillIndex, skill_dirs
from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev
from longhaul.domain.config import MemoryConfig, MiddlewareEntry, PipelineConfig

from tests.unit.agent.support import MemorySink, answer, make_engine, new_state, scripted


async def test_presets_pipeline_and_paths_come_from_the_config(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "triage.md").write_text("# Triage bugs\n…")
    (skills / "web.md").write_text("# Our own web rules\n…")
    config = LonghaulConfig(
        memory=MemoryConfig(skills_dir=skills),
        presets={"triager": {"extends": "analyst", "system_prompt": "Triage."}},
        pipeline=PipelineConfig(middleware=[MiddlewareEntry(name="PromptCache", enabled=False)]),
        data_dir=tmp_path / "data",
    )
    env = AgentEnv(
        presets=PresetCatalog(config.presets),
        skills=SkillIndex.load(skill_dirs(config.memory.skills_dir)),
        working_root=config.data_dir / "work",
        models=config.models,
    )
    engine = Engine(config=config.pipeline, env=env)
    assert "PromptCache" not in [m.config_name() for m in engine.middleware]
    model, script = scripted(answer("ok"))
    state = new_state(config=ev.TraceConfig(preset="triager"))
    await engine.run_turn(state, MemorySink(state), model=model)
    request = script.requests[0]
    assert request.system_stable.startswith("Triage.")
    assert "- triage: Triage bugs" in request.system_stable
    assert "- web: Our own web rules" in request.system_stable  # the project's wins
    assert "- planning: Plan long work" in request.system_stable  # built-ins ship
    assert str(tmp_path / "data" / "work") in request.system_stable
    assert "bash" not in [spec.name for spec in request.tools]
    assert make_engine(tmp_path).config == PipelineConfig()
