"""File tools: read, write, edit, glob, grep — all jailed to the trace's working directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

from longhaul.agent.errors import ToolError
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.jail import inside, jailed, relative
from longhaul.agent.tools.result import ToolResult

_BINARY_PROBE = 8192
_GREP_MAX_FILE = 2_000_000


def _read_text(path: Path) -> str:
    if not path.is_file():
        raise ToolError(f"{path.name}: no such file", code="not_found")
    with path.open("rb") as handle:
        if b"\0" in handle.read(_BINARY_PROBE):
            raise ToolError(f"{path.name} looks binary; not shown", code="binary_file")
    return path.read_text(encoding="utf-8", errors="replace")


@tool(read_only=True, path_params=("path",))
async def read(
    ctx: ToolContext, path: str, offset: int = 1, limit: int | None = None
) -> ToolResult:
    """Read a text file, with line numbers.

    Args:
        path: file path relative to the working directory.
        offset: first line to return (1-based).
        limit: how many lines to return (default: the configured maximum).
    """
    target = jailed(ctx.working_dir, path)
    lines = _read_text(target).splitlines()
    count = min(limit or ctx.settings.read_max_lines, ctx.settings.read_max_lines)
    start = max(offset, 1) - 1
    chunk = lines[start : start + count]
    body = "\n".join(f"{start + i + 1:6}\t{line}" for i, line in enumerate(chunk))
    more = len(lines) - (start + len(chunk))
    if more > 0:
        body += f"\n… {more} more lines (continue with offset={start + len(chunk) + 1})"
    return ToolResult(
        output=body or "(empty file)",
        title=f"read {path}",
        long_term_memory=f"read {path} lines {start + 1}-{start + len(chunk)} (read it again "
        "if you need the text)",
        include_output_only_once=True,
    )


@tool(path_params=("path",))
async def write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    """Create or overwrite a text file (parent directories are created).

    Args:
        path: file path relative to the working directory.
        content: the complete new file content.
    """
    target = jailed(ctx.working_dir, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    size = len(content.encode())
    return ToolResult(output=f"wrote {size} bytes to {path}", title=f"write {path}")


@tool(path_params=("path",))
async def edit(
    ctx: ToolContext, path: str, old: str, new: str, replace_all: bool = False
) -> ToolResult:
    """Replace exact text in a file.

    Args:
        path: file path relative to the working directory.
        old: the exact text to replace (include enough context to be unique).
        new: the replacement text.
        replace_all: replace every occurrence instead of requiring exactly one.
    """
    target = jailed(ctx.working_dir, path)
    text = _read_text(target)
    count = text.count(old) if old else 0
    if count == 0:
        raise ToolError(f"the text to replace was not found in {path}", code="edit_no_match")
    if count > 1 and not replace_all:
        raise ToolError(
            f"the text to replace occurs {count} times in {path}; add context or set replace_all",
            code="edit_ambiguous",
        )
    target.write_text(
        text.replace(old, new) if replace_all else text.replace(old, new, 1), encoding="utf-8"
    )
    return ToolResult(
        output=f"replaced {count if replace_all else 1} occurrence(s) in {path}",
        title=f"edit {path}",
    )


@tool(read_only=True, path_params=("path",))
async def glob(ctx: ToolContext, pattern: str, path: str = ".") -> ToolResult:
    """List files matching a glob pattern (``**`` recurses), sorted by name.

    Args:
        pattern: a relative glob such as ``src/**/*.py``.
        path: directory to search from, relative to the working directory.
    """
    base = jailed(ctx.working_dir, path)
    jailed(ctx.working_dir, pattern)  # the pattern itself may not climb out either
    matches = sorted(
        relative(ctx.working_dir, match)
        for match in base.glob(pattern)
        if inside(ctx.working_dir, match)
    )
    cap = ctx.settings.grep_max_results
    shown = "\n".join(matches[:cap])
    if len(matches) > cap:
        shown += f"\n… {len(matches) - cap} more"
    return ToolResult(output=shown or "no matches", title=f"glob {pattern}")


def _walk(root: Path, base: Path) -> list[Path]:
    if base.is_file():
        return [base]
    found: list[Path] = []
    for directory, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            candidate = Path(directory, name)
            if inside(root, candidate):
                found.append(candidate)
    return found


@tool(read_only=True, path_params=("path",))
async def grep(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    include: str | None = None,
    ignore_case: bool = False,
) -> ToolResult:
    """Search file contents with a regular expression; prints ``file:line: text``.

    Args:
        pattern: a Python regular expression.
        path: file or directory to search, relative to the working directory.
        include: only files whose name matches this glob (e.g. ``*.py``).
        ignore_case: case-insensitive matching.
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression: {exc}", code="tool_call_invalid") from exc
    base = jailed(ctx.working_dir, path)
    cap = ctx.settings.grep_max_results
    hits: list[str] = []
    for file in _walk(ctx.working_dir, base):
        if include and not file.match(include):
            continue
        if file.stat().st_size > _GREP_MAX_FILE:
            continue
        try:
            text = _read_text(file)
        except ToolError:
            continue
        name = relative(ctx.working_dir, file)
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{name}:{number}: {line[:300]}")
                if len(hits) > cap:
                    break
        if len(hits) > cap:
            break
    shown = "\n".join(hits[:cap])
    if len(hits) > cap:
        shown += "\n… more matches; narrow the pattern or path"
    return ToolResult(output=shown or "no matches", title=f"grep {pattern}")
