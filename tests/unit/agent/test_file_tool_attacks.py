"""The file tools attacked the way a hostile model (or a prompt-injected one) would: a swap
loop racing symlinks into the path between check and open, a backtracking regular expression
for ``grep``, and a file far larger than memory for ``read``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolResult
from longhaul.agent.tools.files import edit, grep, read, write

from tests.unit.agent.support import tool_context

SECRET = "TOP-SECRET-OUTSIDE-THE-JAIL"
CALLS = 1500


def swap_loop(jail: Path, outside: Path, stop: threading.Event) -> int:
    """What a sandboxed ``bash`` of the same key can do in the shared directory: swap a real
    file and directory with links out of the jail, as fast as it can."""
    real_file, real_dir = jail / "real.txt", jail / "realdir"
    swaps = 0
    while not stop.is_set():
        for name, real, out in (
            ("notes.txt", real_file, outside / "secret.txt"),
            ("sub", real_dir, outside),
        ):
            link = jail / f".{name}.link"
            try:
                os.symlink(out, link)
                os.replace(link, jail / name)  # now a link out
                os.replace(jail / name, jail / f".{name}.gone")
                os.symlink(real.name, jail / f".{name}.back")
                os.replace(jail / f".{name}.back", jail / name)  # a link inside again
            except OSError:
                pass
            swaps += 1
    return swaps


async def test_a_racing_symlink_swap_never_leaks_or_escapes(tmp_path: Path) -> None:
    jail, outside = tmp_path / "work", tmp_path / "outside"
    jail.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (jail / "real.txt").write_text("inside\n")
    (jail / "realdir").mkdir()
    (jail / "realdir" / "file.txt").write_text("inside too\n")
    os.symlink("real.txt", jail / "notes.txt")
    os.symlink("realdir", jail / "sub")
    ctx = tool_context(jail)
    stop = threading.Event()
    racer = threading.Thread(target=swap_loop, args=(jail, outside, stop), daemon=True)
    racer.start()
    outputs: list[str] = []
    refused = 0
    try:
        for n in range(CALLS):
            for tool, arguments in (
                (read, {"path": "notes.txt"}),
                (read, {"path": "sub/file.txt"}),
                (write, {"path": "sub/written.txt", "content": f"w{n}"}),
                (edit, {"path": "sub/file.txt", "old": "inside", "new": "inside"}),
            ):
                try:
                    result = await tool.run(ctx, arguments)
                except (ToolError, OSError):  # the engine answers either as a tool error
                    refused += 1
                    continue
                assert isinstance(result, ToolResult)
                outputs.append(result.output)
    finally:
        stop.set()
        racer.join(timeout=10)
    assert not any(SECRET in output for output in outputs), "a read leaked the outside file"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"], "a write escaped"
    assert (outside / "secret.txt").read_text() == SECRET + "\n", "an edit escaped"
    assert len(outputs) > CALLS, "the race left almost nothing to compare"
    assert refused > 0, "the swap loop never got in: the race was not run"


async def test_a_backtracking_pattern_does_not_stall_other_traces(tmp_path: Path) -> None:
    """``(a+)+$`` on forty a's and a '!' takes Python's ``re`` hours on the event loop, and
    every other trace of the executor with it. RE2 answers; the loop keeps ticking."""
    (tmp_path / "hostile.txt").write_text(("a" * 40 + "!\n") * 20_000)
    ticks = 0
    done = asyncio.Event()

    async def other_trace() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_trace())
    try:
        result = await grep.run(tool_context(tmp_path), {"pattern": "(a+)+$"})
    finally:
        done.set()
        await ticker
    assert isinstance(result, ToolResult) and result.output == "no matches"
    assert ticks > 1


async def test_patterns_re2_cannot_run_are_a_clear_tool_error(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("abab\n")
    with pytest.raises(ToolError) as refused:
        await grep.run(tool_context(tmp_path), {"pattern": "(ab)\\1"})
    assert refused.value.code == "invalid_regex" and "backreferences" in str(refused.value)


READ_IN_A_CHILD = """
import asyncio, resource, sys
from pathlib import Path
from longhaul.agent.tools.files import read
from tests.unit.agent.support import tool_context
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = asyncio.run(read.run(tool_context(Path(sys.argv[1])), {"path": "huge.log"}))
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(grown, len(result.output), result.output[-80:].replace(chr(10), " "))
"""


def test_a_file_larger_than_memory_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """A 1 GiB file of one line (a sparse file: the disk holds a few KB) once cost ~25 times its
    size in memory; the window asked for is all that is held now."""
    huge = tmp_path / "huge.log"
    with huge.open("wb") as handle:
        handle.write(b"header line\n" + b"x" * 9_000)
        handle.truncate(1 << 30)
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", READ_IN_A_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=300,
        check=True,
    )
    grown_kib, length, tail = done.stdout.split(maxsplit=2)
    assert int(grown_kib) < 64 * 1024, f"peak memory grew {int(grown_kib) // 1024} MiB"
    assert int(length) < 10_000
    assert "[line cut]" in tail
