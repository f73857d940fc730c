"""model_params: a trace's own win over its preset's, field by field; presets are checked."""

from __future__ import annotations

import pytest
from longhaul.agent.presets import Preset
from longhaul.agent.turn import request_params
from longhaul.domain.events import ModelParams, NamedTool
from pydantic import ValidationError


def test_trace_params_win_over_the_preset_field_by_field() -> None:
    preset = Preset(name="p", model_params={"temperature": 0.2, "seed": 1, "stop": ["X"]})
    own = ModelParams(temperature=0.9, tool_choice=NamedTool(name="read"))
    merged = own.over(preset.params())
    assert merged == ModelParams(
        temperature=0.9, seed=1, stop=["X"], tool_choice=NamedTool(name="read")
    )
    assert request_params(merged, None)["tool_choice"] == {"name": "read"}


def test_the_legacy_temperature_fills_in_only_when_params_leave_it_unset() -> None:
    assert request_params(ModelParams(), 0.3)["temperature"] == 0.3
    assert request_params(ModelParams(temperature=0), 0.3)["temperature"] == 0


def test_a_preset_with_unknown_params_is_refused() -> None:
    with pytest.raises(ValidationError, match="model_params"):
        Preset(name="p", model_params={"temprature": 1})
