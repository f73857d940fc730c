"""Your own tools reach the executor by configuration or by installing a package, and each
sees only the secrets the operator granted it by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.tools import ToolSettings
from longhaul.domain.config import ConfigError, ToolsConfig
from longhaul.executor.tools import ToolModuleError, load_tools, tool_on_unknown, tool_secrets


def installed(root: Path, entry_points: str) -> None:
    """A distribution on ``root`` declaring ``entry_points`` (what pip would leave)."""
    info = root / "acme_tools-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_an_installed_package_adds_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "create_ticket" not in load_tools([]).names()
    installed(tmp_path, "[longhaul.tools]\nacme = examples.tools.tickets\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    names = load_tools([]).names()
    assert {"create_ticket", "find_tickets", "word_count"} <= set(names)


def test_an_entry_point_that_is_not_tools_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(tmp_path, "[longhaul.tools]\nacme = examples.tools.tickets:TIMEOUT_S\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ToolModuleError, match="entry point 'acme'"):
        load_tools([])


def test_each_tool_gets_only_what_was_granted_to_it() -> None:
    config = ToolsConfig(secrets={"create_ticket": {"token": "TICKETS_TOKEN"}})
    granted = tool_secrets(config, {"TICKETS_TOKEN": "t0k", "OTHER_SECRET": "x"})
    assert granted == {"create_ticket": {"token": "t0k"}}
    settings = ToolSettings(secrets=granted)
    assert settings.secrets.get("find_tickets", {}) == {}


def test_a_granted_secret_missing_from_the_environment_stops_the_start() -> None:
    config = ToolsConfig(secrets={"create_ticket": {"token": "TICKETS_TOKEN"}})
    with pytest.raises(ConfigError, match="TICKETS_TOKEN not set"):
        tool_secrets(config, {})


def test_on_unknown_names_tools_the_executor_offers() -> None:
    registry = load_tools([], ToolsConfig())
    config = ToolsConfig.model_validate(
        {
            "on_unknown": {"bash": "ask", "deploy": "model", "tickets__close": "rerun"},
            "mcp_servers": {"tickets": {"command": "true"}},
        }
    )
    with pytest.raises(ConfigError, match=r"tools\.on_unknown: no tool named deploy"):
        tool_on_unknown(config, registry)
    config.on_unknown.pop("deploy")
    assert tool_on_unknown(config, registry) == {"bash": "ask", "tickets__close": "rerun"}


def test_on_unknown_takes_only_ask_model_or_rerun() -> None:
    with pytest.raises(ValueError, match=r"on_unknown\.bash"):
        ToolsConfig.model_validate({"on_unknown": {"bash": "retry"}})
