"""``GET /api/traces/{id}`` shows the iteration limit a turn runs with — the trace's own, else
its preset's, else the pipeline's — by the engine's own rule, not only what the client sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.env import AgentEnv
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.skills import SkillIndex
from longhaul.agent.tools import builtin_tools
from longhaul.agent.turn_settings import resolve
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.domain import events as ev
from longhaul.domain.config import PipelineConfig
from longhaul.domain.state import TraceState

from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.support.nats import unique_namespace
from tests.support.runtime import offline_runtime

PRESETS = {"short": {"max_iterations": 3}, "plain": {}}


def with_presets(config: LonghaulConfig) -> LonghaulConfig:
    config.presets = PRESETS
    config.pipeline = PipelineConfig(max_iterations=17)
    return config


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"preset": "short"}, 3),
        ({"preset": "short", "max_iterations": 5}, 5),
        ({"preset": "plain"}, 17),
        ({}, 17),
    ],
)
async def test_get_shows_the_limit_that_applies(
    nats_url: str, body: dict[str, object], expected: int
) -> None:
    config = with_presets(gateway_config(NatsConfig(url=nats_url, namespace=unique_namespace())))
    async with serve_gateway(config) as gateway, gateway.client() as client:
        created = await client.post("/api/traces", json={"messages": [user_message("hi")], **body})
        assert created.status_code == 202, created.text
        view = (await client.get(f"/api/traces/{created.json()['trace_id']}")).json()
    assert view["budget"]["max_iterations"] == expected


@pytest.mark.parametrize("max_iterations", [None, 5])
@pytest.mark.parametrize("preset", ["short", "plain"])
async def test_the_gateways_rule_is_the_engines(
    tmp_path: Path, preset: str, max_iterations: int | None
) -> None:
    config = with_presets(LonghaulConfig())
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id="t_limits",
            messages=[ev.InputMessage(role="user", content="hi")],
            config=ev.TraceConfig(preset=preset, max_iterations=max_iterations),
        ),
        1,
    )
    env = AgentEnv(presets=PresetCatalog(PRESETS), skills=SkillIndex([]), working_root=tmp_path)

    async def no_experiences() -> bool:
        return False

    settings = await resolve(
        state, env, config.pipeline, builtin_tools(), has_experiences=no_experiences
    )
    runtime = offline_runtime(config)
    assert runtime.max_iterations(state) == settings.max_iterations
