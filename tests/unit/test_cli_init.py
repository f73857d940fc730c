"""``longhaul init``: the ``longhaul.yaml`` it writes loads (its preset included), its tool
module gives the executor a working tool, and it never overwrites a file unasked."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.agent.presets import PresetCatalog
from longhaul.agent.tools import ToolResult
from longhaul.cli.init import write_starter
from longhaul.core.config import load_config
from longhaul.executor.tools import load_tools

from tests.unit.agent.support import tool_context


def test_the_written_config_loads_with_its_preset_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_starter(tmp_path, "k" * 32, force=False)
    monkeypatch.setenv("LONGHAUL_CONFIG", str(tmp_path / "longhaul.yaml"))
    config = load_config()
    assert config.models.default == "scripted:demo"
    assert config.gateway.api_keys == []  # the key is there commented, for when it is wanted
    assert "k" * 32 in (tmp_path / "longhaul.yaml").read_text()
    reviewer = PresetCatalog(config.presets).get("reviewer")
    assert reviewer.name == "reviewer" and reviewer.read_only


async def test_the_tool_module_loads_and_its_tool_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_starter(tmp_path, "k" * 32, force=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = load_tools(["my_tools"])
    tool = registry.get("file_stats")
    assert tool is not None
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("one two\nthree\n")
    result = await tool.run(tool_context(work), {"path": "notes.txt"})
    assert isinstance(result, ToolResult)
    assert "2 lines, 3 words" in str(result.output)


def test_an_existing_file_is_never_overwritten_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text("# mine\n")
    with pytest.raises(FileExistsError, match=r"my_tools\.py"):
        write_starter(tmp_path, "k" * 32, force=False)
    assert (tmp_path / "my_tools.py").read_text() == "# mine\n"
    assert not (tmp_path / "longhaul.yaml").exists()  # refused whole
    write_starter(tmp_path, "k" * 32, force=True)
    assert "file_stats" in (tmp_path / "my_tools.py").read_text()
