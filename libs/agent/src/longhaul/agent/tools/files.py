"""File tools: read, write, edit, glob, grep — all jailed to the trace's working directory.

They run in the executor, beside every other tenant's traces, on files a sandboxed ``bash``
of the same key may be changing: every open goes through :mod:`~longhaul.agent.tools.confined_paths`
(resolved in the kernel, never out of the directory), the work runs in a thread, reads are
streamed and capped (memory follows the window asked for, not the file), and ``grep`` matches
with RE2 (linear time: no pattern can stall the executor) under a deadline.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Literal

import re2
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import confined_paths
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.jail import inside, jailed, relative
from longhaul.agent.tools.result import CUT_OFF, ToolResult

_BINARY_PROBE = 8192
_GREP_MAX_FILE = 2_000_000
_GREP_DEADLINE_S = 20.0
_LINE_MAX_BYTES = 4_000
"""A longer line is shown cut (a minified file, a log with no newlines)."""
_COUNT_MAX_BYTES = 64 * 1024 * 1024
"""How far past the window lines are still counted for "N more lines"."""
EDIT_MAX_BYTES = 8 * 1024 * 1024
_CHUNK = 64 * 1024


def _check_text(fd: int, path: str) -> None:
    if b"\0" in os.pread(fd, _BINARY_PROBE, 0):
        raise ToolError(f"{path} looks binary; not shown", code="binary_file")


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, bool]]:
    """Each line (without its newline) cut at ``_LINE_MAX_BYTES``, and whether it was cut;
    the rest of a long line is skipped in chunks, never held."""
    while True:
        line = handle.readline(_LINE_MAX_BYTES + 1)
        if not line:
            return
        if line.endswith(b"\n"):
            yield line[:-1], False
            continue
        if len(line) <= _LINE_MAX_BYTES:  # the last line, without a newline
            yield line, False
            return
        while True:
            rest = handle.readline(_CHUNK)
            if not rest or rest.endswith(b"\n"):
                break
        yield line[:_LINE_MAX_BYTES], True


def _count_newlines(handle: BinaryIO) -> tuple[int, bool]:
    """Lines left (up to ``_COUNT_MAX_BYTES`` read), and whether the count is whole."""
    count = read = 0
    last = b"\n"
    while read < _COUNT_MAX_BYTES:
        chunk = handle.read(_CHUNK)
        if not chunk:
            return count + (last != b"\n"), True
        count += chunk.count(b"\n")
        last = chunk[-1:]
        read += len(chunk)
    return count, False


def _read_window(root: Path, path: str, start: int, count: int) -> tuple[str, int, bool, int]:
    """Lines ``start``.. (``count`` at most), numbered; lines after them; whether that count
    is whole; the file's size."""
    with confined_paths.root(root) as root_dir, confined_paths.opened(root_dir, path) as fd:
        _check_text(fd, path)
        size = os.fstat(fd).st_size
        with os.fdopen(os.dup(fd), "rb", buffering=_CHUNK) as handle:
            shown: list[str] = []
            for number, (line, cut) in enumerate(_lines(handle), 1):
                if number <= start:
                    continue
                text = line.decode("utf-8", errors="replace")
                shown.append(f"{number:6}\t{text}" + (" … [line cut]" if cut else ""))
                if len(shown) >= count:
                    break
            more, whole = _count_newlines(handle)
    return "\n".join(shown), more, whole, size


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
    jailed(ctx.working_dir, path)  # a clear refusal first; the open itself is what holds
    count = min(limit or ctx.settings.read_max_lines, ctx.settings.read_max_lines)
    start = max(offset, 1) - 1
    body, more, whole, size = await asyncio.to_thread(
        _read_window, ctx.working_dir, path, start, count
    )
    shown = body.count("\n") + 1 if body else 0
    if more > 0:
        lines = f"{more} more lines" if whole else f"more lines (the file is {size} bytes)"
        body += f"\n… {lines} (continue with offset={start + shown + 1})"
    return ToolResult(
        output=body or "(empty file)",
        title=f"read {path}",
        long_term_memory=f"read {path} lines {start + 1}-{start + shown} (read it again "
        "if you need the text)",
        include_output_only_once=True,
    )


def _write(root: Path, path: str, data: bytes) -> None:
    with confined_paths.root(root) as root_dir:
        confined_paths.replace_file(root_dir, path, data)


FileOutcome = Literal["done", "not_done", "changed"]
"""What a file shows of a write or edit cut off by a crash: made, not made, or changed by
someone else since (so neither can be told)."""


def write_outcome(current: bytes | None, content: str) -> FileOutcome:
    """A write replaces the file at once: it holds the content (done), is missing (not done),
    or holds something else (not done, or rewritten since: which cannot be told)."""
    if current is None:
        return "not_done"
    return "done" if current == content.encode() else "changed"


def edit_outcome(current: bytes | None, old: str, new: str) -> FileOutcome:
    """Whether the file still holds the text to replace, the replacement, or neither."""
    if current is None:
        return "changed"
    text = current.decode("utf-8", errors="replace")
    has_old, has_new = old in text, bool(new) and new in text
    if old in new:  # the replacement contains the old text: only the new one tells
        return "done" if has_new else "not_done" if has_old else "changed"
    if has_old:
        return "not_done" if not has_new or new in old else "changed"
    return "done" if has_new or not new else "changed"


_TOLD: dict[FileOutcome, str] = {
    "done": "the file shows it was made: nothing to do again",
    "not_done": "the file shows it was not made: do it again if it is still wanted",
    "changed": "the file does not show it as made or as not made: it was changed by someone "
    "else (or the change did not happen). Read it before changing it",
}


def _current(root: Path, path: str) -> bytes | None:
    try:
        with confined_paths.root(root) as root_dir, confined_paths.opened(root_dir, path) as fd:
            if os.fstat(fd).st_size > EDIT_MAX_BYTES:
                return b""  # too big to compare: neither made nor not made can be told
            with os.fdopen(os.dup(fd), "rb") as handle:
                return handle.read()
    except ToolError as exc:
        if exc.code == "not_found":
            return None
        raise


def _told(what: str, outcome: FileOutcome) -> ToolResult:
    return ToolResult(
        output=f"this {what} was cut off by a crash before its result was recorded; "
        f"{_TOLD[outcome]}.",
        title=f"{what} (cut off: {outcome.replace('_', ' ')})",
        error_code=None if outcome == "done" else CUT_OFF,
    )


async def _settle_write(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    path, content = str(arguments["path"]), str(arguments["content"])
    jailed(ctx.working_dir, path)
    current = await asyncio.to_thread(_current, ctx.working_dir, path)
    return _told(f"write of {path}", write_outcome(current, content))


async def _settle_edit(ctx: ToolContext, arguments: dict[str, Any]) -> ToolResult:
    path = str(arguments["path"])
    jailed(ctx.working_dir, path)
    current = await asyncio.to_thread(_current, ctx.working_dir, path)
    outcome = edit_outcome(current, str(arguments["old"]), str(arguments["new"]))
    return _told(f"edit of {path}", outcome)


# A write or edit cut off by a crash: the model is told what the file shows (done, not done,
# or changed since); rerunning a write could overwrite someone else's change.
@tool(path_params=("path",), effects="idempotent", on_unknown="model", settle=_settle_write)
async def write(ctx: ToolContext, path: str, content: str) -> ToolResult:
    """Create or overwrite a text file (parent directories are created).

    Args:
        path: file path relative to the working directory.
        content: the complete new file content.
    """
    jailed(ctx.working_dir, path)
    data = content.encode()
    await asyncio.to_thread(_write, ctx.working_dir, path, data)
    return ToolResult(output=f"wrote {len(data)} bytes to {path}", title=f"write {path}")


def _edit(root: Path, path: str, old: str, new: str, replace_all: bool) -> int:
    with confined_paths.root(root) as root_dir:
        with confined_paths.opened(root_dir, path) as fd:
            _check_text(fd, path)
            size = os.fstat(fd).st_size
            if size > EDIT_MAX_BYTES:
                raise ToolError(
                    f"{path} is {size} bytes, over the {EDIT_MAX_BYTES} an edit reads; "
                    "change it with bash (sed, a script) instead",
                    code="file_too_large",
                )
            with os.fdopen(os.dup(fd), "rb") as handle:
                text = handle.read(EDIT_MAX_BYTES + 1).decode("utf-8", errors="replace")
        count = text.count(old) if old else 0
        if count == 0:
            raise ToolError(f"the text to replace was not found in {path}", code="edit_no_match")
        if count > 1 and not replace_all:
            raise ToolError(
                f"the text to replace occurs {count} times in {path}; add context or set "
                "replace_all",
                code="edit_ambiguous",
            )
        changed = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        confined_paths.replace_file(root_dir, path, changed.encode())
    return count if replace_all else 1


@tool(path_params=("path",), on_unknown="model", settle=_settle_edit)
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
    jailed(ctx.working_dir, path)
    replaced = await asyncio.to_thread(_edit, ctx.working_dir, path, old, new, replace_all)
    return ToolResult(output=f"replaced {replaced} occurrence(s) in {path}", title=f"edit {path}")


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


def _compile(pattern: str, ignore_case: bool) -> object:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        raise ToolError(
            f"invalid regular expression: {exc} (RE2 syntax: no backreferences or lookaround)",
            code="invalid_regex",
        ) from exc


def _grep(
    root: Path, base: Path, regex: object, include: str | None, cap: int
) -> tuple[list[str], bool]:
    """``file:line: text`` hits (one more than ``cap`` means more), and whether the deadline
    cut the search."""
    deadline = time.monotonic() + _GREP_DEADLINE_S
    hits: list[str] = []
    with confined_paths.root(root) as root_dir:
        for file in _walk(root, base):
            if time.monotonic() > deadline:
                return hits, True
            if include and not file.match(include):
                continue
            name = relative(root, file)
            try:
                with confined_paths.opened(root_dir, name) as fd:
                    if os.fstat(fd).st_size > _GREP_MAX_FILE:
                        continue
                    _check_text(fd, name)
                    with os.fdopen(os.dup(fd), "rb") as handle:
                        for number, (line, _) in enumerate(_lines(handle), 1):
                            text = line.decode("utf-8", errors="replace")
                            if regex.search(text):  # type: ignore[attr-defined]
                                hits.append(f"{name}:{number}: {text[:300]}")
                                if len(hits) > cap:
                                    return hits, False
            except (ToolError, OSError):
                continue
    return hits, False


@tool(read_only=True, path_params=("path",))
async def grep(
    ctx: ToolContext,
    pattern: str,
    path: str = ".",
    include: str | None = None,
    ignore_case: bool = False,
) -> ToolResult:
    """Search file contents with a regular expression (RE2 syntax: like Python's, without
    backreferences or lookaround); prints ``file:line: text``.

    Args:
        pattern: a regular expression.
        path: file or directory to search, relative to the working directory.
        include: only files whose name matches this glob (e.g. ``*.py``).
        ignore_case: case-insensitive matching.
    """
    regex = _compile(pattern, ignore_case)
    base = jailed(ctx.working_dir, path)
    cap = ctx.settings.grep_max_results
    hits, timed_out = await asyncio.to_thread(_grep, ctx.working_dir, base, regex, include, cap)
    shown = "\n".join(hits[:cap])
    if len(hits) > cap:
        shown += "\n… more matches; narrow the pattern or path"
    if timed_out:
        shown += f"\n… search stopped after {_GREP_DEADLINE_S:.0f} s; narrow the path"
    return ToolResult(output=shown or "no matches", title=f"grep {pattern}")
