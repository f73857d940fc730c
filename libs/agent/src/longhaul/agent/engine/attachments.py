"""Tool attachments go to the workspace; the tool message carries their keys."""

from __future__ import annotations

import re

from longhaul.agent.tools.result import ToolResult
from longhaul.agent.turn import Turn


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_=-]", "_", part) or "_"


async def store_attachments(turn: Turn, call_id: str, result: ToolResult) -> str:
    """Text to append to the tool message (empty without attachments)."""
    if not result.attachments:
        return ""
    workspace = turn.env.workspace
    lines = []
    for item in result.attachments:
        described = f"attachment {item.name} ({item.media_type}, {len(item.data)} bytes)"
        if workspace is None:
            lines.append(f"{described} dropped: no workspace is attached")
            continue
        key = f"trace/{_safe(turn.trace_id)}/attachments/{_safe(call_id)}/{_safe(item.name)}"
        await workspace.put(key, item.data)
        lines.append(f"{described}: read it with workspace_read key={key}")
    return "\n\n" + "\n".join(lines)
