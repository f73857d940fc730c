"""File tools work inside the working directory and refuse every way out of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult, ToolSettings
from longhaul.agent.tools.files import edit, glob, grep, read, write
from longhaul.agent.tools.shell import bash
from longhaul.domain.config import SandboxConfig

from tests.unit.agent.support import tool_context


@pytest.fixture
def jail(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    os.symlink(tmp_path / "secret.txt", root / "leak.txt")
    os.symlink(tmp_path, root / "outside")
    os.link(tmp_path / "secret.txt", root / "hardlink.txt")  # what `ln /etc/passwd x` makes
    return root


ESCAPES = {
    "dotdot": "../secret.txt",
    "absolute": "/etc/passwd",
    "symlink_file": "leak.txt",
    "symlink_dir": "outside/secret.txt",
    "hardlink": "hardlink.txt",
}

CALLS = {
    "read": (read, lambda p: {"path": p}),
    "write": (write, lambda p: {"path": p, "content": "x"}),
    "edit": (edit, lambda p: {"path": p, "old": "TOP", "new": "NOT"}),
    "glob": (glob, lambda p: {"pattern": "*", "path": p}),
    "grep": (grep, lambda p: {"pattern": "SECRET", "path": p}),
}


@pytest.mark.parametrize("tool_name", sorted(CALLS))
@pytest.mark.parametrize("escape", sorted(ESCAPES))
async def test_every_file_tool_refuses_every_escape(jail: Path, tool_name: str, escape: str):
    target, arguments = CALLS[tool_name]
    with pytest.raises(ToolError) as refused:
        await target.run(tool_context(jail), arguments(ESCAPES[escape]))
    assert refused.value.code == "path_outside_workdir"
    assert "working directory" in str(refused.value) or "absolute" in str(refused.value)
    assert (jail.parent / "secret.txt").read_text() == "TOP SECRET\n"


async def test_glob_pattern_cannot_climb_and_symlinked_matches_are_hidden(jail: Path) -> None:
    with pytest.raises(ToolError):
        await glob.run(tool_context(jail), {"pattern": "../*"})
    listed = await glob.run(tool_context(jail), {"pattern": "**/*"})
    assert isinstance(listed, ToolResult)
    assert "src/app.py" in listed.output
    assert "leak.txt" not in listed.output and "secret" not in listed.output
    assert "hardlink.txt" not in listed.output


async def test_grep_skips_symlinks_out_when_walking(jail: Path) -> None:
    result = await grep.run(tool_context(jail), {"pattern": "SECRET|42"})
    assert isinstance(result, ToolResult)
    assert result.output == "src/app.py:2:     return 42"


async def test_read_numbers_lines_and_is_a_one_time_output(jail: Path) -> None:
    result = await read.run(tool_context(jail), {"path": "src/app.py", "offset": 2})
    assert isinstance(result, ToolResult)
    assert result.output == "     2\t    return 42"
    assert result.include_output_only_once and result.long_term_memory


async def test_write_then_edit_round_trip(jail: Path) -> None:
    ctx = tool_context(jail)
    await write.run(ctx, {"path": "notes/todo.md", "content": "a b a"})
    with pytest.raises(ToolError) as ambiguous:
        await edit.run(ctx, {"path": "notes/todo.md", "old": "a", "new": "c"})
    assert ambiguous.value.code == "edit_ambiguous"
    await edit.run(ctx, {"path": "notes/todo.md", "old": "a", "new": "c", "replace_all": True})
    assert (jail / "notes" / "todo.md").read_text() == "c b c"
    with pytest.raises(ToolError) as missing:
        await edit.run(ctx, {"path": "notes/todo.md", "old": "zzz", "new": "c"})
    assert missing.value.code == "edit_no_match"


async def test_a_hard_link_made_with_bash_cannot_be_read(jail: Path) -> None:
    # S5: the link is made from inside (bash), then read with the file tool. The sandbox
    # does not let bash see ../secret.txt at all; unconfined (sandbox.mode: none, the
    # operator's opt-out) it can make the link, and the file tool still refuses it.
    unconfined = ToolSettings(sandbox=SandboxConfig(mode="none"))
    made = await bash.run(
        tool_context(jail, settings=unconfined), {"command": "ln ../secret.txt mine.txt"}
    )
    assert isinstance(made, ToolResult) and made.error_code is None
    with pytest.raises(ToolError) as refused:
        await read.run(tool_context(jail), {"path": "mine.txt"})
    assert refused.value.code == "path_outside_workdir" and "hard link" in str(refused.value)
