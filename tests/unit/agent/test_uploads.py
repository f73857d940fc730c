"""Uploads reach the working directory before the next model call, and the model is told;
a name planted as a link by a tool is replaced, never followed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
from longhaul.domain import events as ev

from tests.unit.agent.support import (
    MemorySink,
    MemoryWorkspace,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
    trace_dir,
)


def uploaded(workspace: MemoryWorkspace, name: str, data: bytes) -> ev.FileUploaded:
    digest = hashlib.sha256(data).hexdigest()
    key = f"uploads/t_test/{digest}"
    workspace.data[key] = data
    return ev.FileUploaded(name=name, size=len(data), sha256=digest, key=key)


async def test_an_upload_is_written_and_announced_before_the_model_call(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    workspace = MemoryWorkspace()
    engine = make_engine(tmp_path, workspace=workspace)
    state = new_state("summarise the file I send")
    sink = MemorySink(state)
    await sink.emit([uploaded(workspace, "report.csv", b"a,b\n1,2\n")])
    model, script = scripted(calls(call("read", {"path": "report.csv"})), answer("two columns"))
    outcome = await engine.run_turn(state, sink, model=model)
    assert outcome.end == "completed"
    assert (home / "report.csv").read_bytes() == b"a,b\n1,2\n"
    told = script.requests[0].messages[-1]
    assert told["role"] == "user" and "report.csv (8 bytes)" in told["content"]
    assert "1,2" in str(script.requests[1].messages[-1]["content"])  # the read saw it
    assert state.uploads_pending == [] and len(sink.of_type(ev.FilesDelivered)) == 1


async def test_a_planted_symlink_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    work = tmp_path / "work"
    home = trace_dir(work)
    os.symlink(outside, home / "notes.txt")
    os.link(outside, home / "hard.txt")
    workspace = MemoryWorkspace()
    engine = make_engine(work, workspace=workspace)
    state = new_state("here are notes")
    sink = MemorySink(state)
    await sink.emit(
        [uploaded(workspace, "notes.txt", b"new"), uploaded(workspace, "hard.txt", b"new")]
    )
    model, _ = scripted(answer("ok"))
    await engine.run_turn(state, sink, model=model)
    assert outside.read_text() == "keep"
    assert not (home / "notes.txt").is_symlink() and (home / "notes.txt").read_text() == "new"
    assert (home / "hard.txt").read_text() == "new"


async def test_missing_content_is_reported_and_not_retried(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, workspace=MemoryWorkspace())
    state = new_state("go")
    sink = MemorySink(state)
    await sink.emit([ev.FileUploaded(name="gone.bin", size=3, sha256="0" * 64, key="uploads/x")])
    model, script = scripted(answer("ok"))
    await engine.run_turn(state, sink, model=model)
    told = script.requests[0].messages[-1]["content"]
    assert "could not be delivered: gone.bin" in told
    assert state.uploads_pending == []


async def test_an_upload_into_a_folder_swapped_for_a_link_lands_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's process (a background job a tool left running) swaps the sub-folder an
    upload goes to for a link out of the working directory at the worst moment: after the
    folder was looked at, before the file is created in it. The file still lands beneath the
    working directory (in the folder as it was opened), never in the link's target."""
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    home = trace_dir(work)
    (home / "docs").mkdir()
    real_open = os.open
    swapped: list[str] = []

    def agent_wins_the_race(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and not swapped:
            os.rename(home / "docs", home / "moved")
            os.symlink(outside, home / "docs")
            swapped.append(str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", agent_wins_the_race)
    workspace = MemoryWorkspace()
    engine = make_engine(work, workspace=workspace)
    state = new_state("here is the plan")
    sink = MemorySink(state)
    await sink.emit([uploaded(workspace, "docs/plan.md", b"secret plan")])
    model, _ = scripted(answer("ok"))
    await engine.run_turn(state, sink, model=model)
    assert swapped, "the upload created no file"
    assert list(outside.iterdir()) == []
    assert (home / "moved" / "plan.md").read_bytes() == b"secret plan"
