"""Presets: built-ins, user presets from config (with extends), and tool selection."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from longhaul.agent import BUILTIN_PRESETS, PresetCatalog, builtin_tools
from longhaul.agent.tools.builtin import OPT_IN_TOOLS
from longhaul.core.config import LonghaulConfig
from longhaul.domain import events as ev

from tests.unit.agent.support import MemorySink, answer, make_engine, new_state, scripted


def names(
    preset: str, config: ev.TraceConfig | None = None, catalog: PresetCatalog | None = None
) -> set[str]:
    chosen = (catalog or PresetCatalog()).get(preset)
    return set(chosen.select_tools(builtin_tools(), config or ev.TraceConfig()).names())


def test_builtin_presets() -> None:
    assert set(BUILTIN_PRESETS) == {"default", "explore", "analyst", "browser"}
    everything = set(builtin_tools().names())
    assert names("default") == everything - {"check_messages", "send_message"}
    assert names("default", ev.TraceConfig(messaging=True)) == everything
    # the opt-in tools an executor registers: only the browser preset offers them
    with_opt_in = builtin_tools()
    for item in OPT_IN_TOOLS:
        with_opt_in.register(item)
    opt_in = {item.name for item in OPT_IN_TOOLS}
    browser_actions = ("navigate", "snapshot", "click", "type", "screenshot")
    assert opt_in == {"view_image", *(f"browser_{action}" for action in browser_actions)}
    default = PresetCatalog().get("default").select_tools(with_opt_in, ev.TraceConfig())
    browser = PresetCatalog().get("browser").select_tools(with_opt_in, ev.TraceConfig())
    assert not opt_in & set(default.names()) and opt_in <= set(browser.names())
    assert "browser_navigate" in BUILTIN_PRESETS["browser"].system_prompt
    assert names("explore") == {
        "read",
        "glob",
        "grep",
        "webfetch",
        "skill",
        "workspace_read",
        "goal",
    }
    analyst = names("analyst")
    assert not analyst & {"bash", "write", "edit", "agent"} and "ask_human" in analyst
    assert BUILTIN_PRESETS["analyst"].temperature == 0.2


def test_trace_config_narrows_further() -> None:
    assert names("default", ev.TraceConfig(tools=["read", "bash"])) == {"read", "bash"}
    read_only = names("default", ev.TraceConfig(read_only=True))
    assert "bash" not in read_only and "write" not in read_only and "read" in read_only


def test_a_shared_servers_tools_are_offered_only_by_presets_naming_it() -> None:
    tools = builtin_tools()
    read = tools.get("read")
    assert read is not None
    for name, shared in (("docs__search", True), ("files__read_file", False)):
        metadata = {"origin": "mcp", "server": name.split("__")[0], "shared": shared}
        tools.register(dataclasses.replace(read, name=name, metadata=metadata))
    catalog = PresetCatalog(
        {
            "docs": {"allowed_tools": ["read", "docs__*"]},
            "everything": {"allowed_tools": ["*"]},
            "one": {"extends": "default", "allowed_tools": ["*", "docs__search"]},
        }
    )

    def offered(preset: str, config: ev.TraceConfig | None = None) -> set[str]:
        chosen = catalog.get(preset).select_tools(tools, config or ev.TraceConfig())
        return set(chosen.names())

    assert "files__read_file" in offered("default") and "docs__search" not in offered("default")
    assert "docs__search" not in offered("everything")  # a bare * names no server
    assert "docs__search" not in offered("default", ev.TraceConfig(tools=["docs__search"]))
    assert offered("docs") == {"read", "docs__search"}
    assert "docs__search" in offered("one")


def test_user_presets_from_config_extend_and_override() -> None:
    config = LonghaulConfig(
        presets={
            "reviewer": {"extends": "analyst", "max_iterations": 12, "skills": ["review"]},
            "strict": {"extends": "reviewer", "denied_tools": ["webfetch"]},
            "default": {"system_prompt": "House rules."},
        }
    )
    catalog = PresetCatalog(config.presets)
    reviewer = catalog.get("reviewer")
    assert reviewer.max_iterations == 12 and reviewer.temperature == 0.2
    assert reviewer.skills == ["review"]
    assert "webfetch" not in names("strict", catalog=catalog)
    assert catalog.get("default").system_prompt == "House rules."
    assert catalog.get("unknown-name").name == "default"


def test_bad_user_presets_are_config_errors() -> None:
    with pytest.raises(ValueError, match="unknown preset"):
        PresetCatalog({"x": {"extends": "nope"}})
    with pytest.raises(ValueError, match="cycle"):
        PresetCatalog({"a": {"extends": "b"}, "b": {"extends": "a"}})
    with pytest.raises(ValueError):
        PresetCatalog({"x": {"bogus_field": 1}})


async def test_the_turn_uses_the_preset(tmp_path: Path) -> None:
    catalog = PresetCatalog(
        {"tiny": {"allowed_tools": ["glob"], "system_prompt": "Be tiny.", "temperature": 0.7}}
    )
    model, script = scripted(answer("ok"))
    state = new_state(config=ev.TraceConfig(preset="tiny"))
    await make_engine(tmp_path, presets=catalog).run_turn(state, MemorySink(state), model=model)
    [request] = script.requests
    assert [spec.name for spec in request.tools] == ["glob"]
    assert request.system_stable.startswith("Be tiny.") and request.temperature == 0.7
