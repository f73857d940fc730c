"""``TraceSettings``: the one declaration of what a client may set, and the config it gives
the log."""

from __future__ import annotations

import msgspec
import pytest
from longhaul.domain import events as ev
from longhaul.domain.settings import SETTINGS, TraceSettings
from longhaul.gateway.schemas.traces import CreateTraceRequest
from pydantic import ValidationError

from tests.unit.test_client_models import EVERY_SETTING


def test_every_setting_is_recorded_on_the_log_by_its_name() -> None:
    assert set(ev.TraceConfig.__struct_fields__) - SETTINGS == {"working_dir", "read_only"}
    config = msgspec.convert(EVERY_SETTING, TraceSettings).config()
    default = ev.TraceConfig()
    unset = [name for name in SETTINGS if getattr(config, name) == getattr(default, name)]
    assert unset == []


def test_no_settings_give_the_default_config() -> None:
    assert TraceSettings().config() == ev.TraceConfig()


def test_the_shapes_the_log_keeps_its_own_way() -> None:
    """The preset left out is ``default``; approval is a list; an empty verification is none."""
    config = msgspec.convert(
        {"approval": {"tools": "*"}, "verification": {}, "skills": None}, TraceSettings
    ).config()
    assert (config.preset, config.approval, config.verification, config.skills) == (
        "default",
        ["*"],
        None,
        [],
    )
    listed = msgspec.convert({"approval": {"tools": ["bash"]}}, TraceSettings).config()
    assert listed.approval == ["bash"]


@pytest.mark.parametrize(
    "bad",
    [
        {"max_iterations": 0},
        {"max_cost": -1.0},
        {"temperature": 2.5},
        {"tools": ["a/b"]},
        {"model": "no-provider"},
        {"max_iteration": 3},
    ],
)
def test_the_domain_and_the_api_refuse_the_same(bad: dict[str, object]) -> None:
    """The create body's fields carry the domain's constraints (derived, not restated)."""
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(bad, TraceSettings)
    with pytest.raises(ValidationError):
        CreateTraceRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **bad})


def test_the_api_takes_integral_numbers_as_the_domain_takes_integers() -> None:
    body = CreateTraceRequest.model_validate(
        {"messages": [{"role": "user", "content": "hi"}], "max_iterations": 7.0}
    )
    assert body.settings().max_iterations == 7
