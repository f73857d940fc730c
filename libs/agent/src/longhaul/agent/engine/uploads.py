"""Files a client uploaded reach the working directory before the next model call.

The gateway keeps an upload's bytes in the workspace (``uploads/<trace>/<sha256>``) and records
``FileUploaded``; here they (only keys under the trace's own ``uploads/<trace>/``) are written
into the trace's working directory and the model is told, in one batch with ``FilesDelivered``
(so a crash never tells twice or loses one). The write is the file tools'
(``tools.confined_paths``): every folder on the way is opened from the working directory's
descriptor and may not lead out of it, the file is created in its folder's descriptor and
renamed over the name there, so a symlink or hard link a tool planted under that name is
replaced, never followed, and a folder swapped for a link meanwhile (a process the agent left
running) cannot redirect it. A trace's initial files (an eval task's) may name sub-directories,
made where missing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from longhaul.agent.errors import ToolError
from longhaul.agent.tools import confined_paths
from longhaul.agent.turn import Turn
from longhaul.domain.events import FilesDelivered, FileUploaded


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def _write(directory: Path, name: str, data: bytes) -> None:
    parts = tuple(name.split("/"))
    if any(not part or part.startswith(".") or Path(part).name != part for part in parts):
        raise ValueError(f"unsafe upload name {name!r}")
    directory.mkdir(parents=True, exist_ok=True)
    with confined_paths.root(directory) as root:
        confined_paths.replace_file(root, name, data)


async def deliver_uploads(turn: Turn) -> None:
    """Write pending uploads and tell the model, unless a tool call is still unanswered (a
    message between a call and its result would break the conversation)."""
    pending = turn.state.uploads_pending
    if not pending or turn.state.unanswered_tool_calls():
        return
    delivered: list[FileUploaded] = []
    problems: list[str] = []
    workspace = turn.env.workspace
    own = f"uploads/{turn.state.trace_id}/"
    for upload in list(pending):
        # only this trace's own uploads: an imported log could name another trace's key
        mine = workspace is not None and upload.key.startswith(own)
        data = await workspace.get(upload.key) if mine and workspace is not None else None
        if data is None:
            problems.append(f"{upload.name} (its content was not found)")
            continue
        try:
            await asyncio.to_thread(_write, turn.working_dir, upload.name, data)
        except (OSError, ValueError, ToolError) as exc:
            problems.append(f"{upload.name} ({exc})")
            continue
        delivered.append(upload)
    lines = []
    if delivered:
        files = ", ".join(f"{u.name} ({_size(u.size)})" for u in delivered)
        lines.append(f"Files uploaded to your working directory: {files}.")
    if problems:
        lines.append("These uploads could not be delivered: " + "; ".join(problems) + ".")
    batch = turn.batch()
    batch.message("user", content="\n".join(lines), synthetic=True)
    batch.add(FilesDelivered(names=[u.name for u in pending]))
    await turn.emit(batch)
