"""Bad fallback configuration stops the process at start, naming the key: an unknown model in
a chain is found before an outage needs it; a negative or non-numeric limit is refused."""

from __future__ import annotations

from typing import Any

import pytest
from longhaul.agent.config_check import check_config
from longhaul.core.config import LonghaulConfig
from longhaul.domain.config import ConfigError
from pydantic import ValidationError


def config(models: dict[str, Any] | None = None, **rest: Any) -> LonghaulConfig:
    return LonghaulConfig.model_validate(
        {"models": {"default": "openai:gpt-4o", **(models or {})}, **rest}
    )


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"models": {"fallback": ["anthropic:claude", "nosuch:x"]}}, "models.fallback[1]"),
        ({"models": {"fallback": ["no-colon"]}}, "models.fallback[0]"),
        (
            {"models": {"roles_fallback": {"planner": ["scripted:../x.yaml"]}}},
            "models.roles_fallback.planner[0]",
        ),
        (
            {"presets": {"fast": {"model_fallback": ["gemini:ok", "nosuch:x"]}}},
            "presets.fast.model_fallback[1]",
        ),
    ],
)
def test_an_unusable_model_in_a_chain_is_refused_at_start(
    settings: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        check_config(config(**settings))
    assert str(caught.value).startswith(f"{key}: ")


def test_the_operators_own_chain_may_name_what_clients_may_not() -> None:
    check_config(config({"fallback": ["anthropic:claude", "local:/models/mine.gguf"]}))


@pytest.mark.parametrize(
    ("models", "field"),
    [
        ({"circuit": {"failures": -1}}, "failures"),
        ({"circuit": {"failures": "many"}}, "failures"),
        ({"circuit": {"window_s": 0}}, "window_s"),
        ({"circuit": {"open_s": -5}}, "open_s"),
        ({"providers": {"openai": {"max_retry_after_s": -1}}}, "max_retry_after_s"),
        ({"fallback": "anthropic:claude"}, "fallback"),
    ],
)
def test_a_negative_or_non_numeric_limit_is_refused(models: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        config(models)
    assert field in str(caught.value)
