"""State offloading: a phase's full output lives in the workspace, its context a summary.

The next phases' step traces get at most ``SUMMARY_LIMIT`` characters per dependency plus the
workspace key, and read the full text on demand with the ``workspace_read`` tool; this keeps
every prompt small however long the outputs grow (the workspace moves large values to the
object store by itself). Outputs are written with create-only semantics: the first result
recorded for a phase is the one every reader sees, even if two planner replicas raced.
"""

from __future__ import annotations

from longhaul.core.workspace import WorkspaceConflict, WorkspaceStore

SUMMARY_LIMIT = 500
ELLIPSIS = " …"


def phase_output_key(task_id: str, phase_id: str) -> str:
    return f"task/{task_id}/phase/{phase_id}/output"


def task_output_key(task_id: str) -> str:
    return f"task/{task_id}/output"


def summarise(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """``text`` itself when short, else its start cut at a word boundary, marked with …"""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS


async def store_output(workspace: WorkspaceStore, key: str, text: str) -> str:
    """Record ``text`` under ``key`` unless a result is there already; returns the one stored."""
    try:
        await workspace.put(key, text.encode(), expected_revision=0)
    except WorkspaceConflict:
        existing = await workspace.get(key)
        if existing is not None:
            return existing.value.decode(errors="replace")
        await workspace.put(key, text.encode())
    return text
