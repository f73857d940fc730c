"""Tool attachments go to the workspace; the tool message carries their keys.

An attachment marked ``show`` (an image the model asked to see) also becomes an
``image_url`` part. Those parts wait until every call of the model turn is answered (a user
message may not split a tool group) and then go out as one synthetic user message; a long
data URL is stored under the trace owner's ``images/`` key (:mod:`longhaul.agent.images`) so
the event carries a reference, never the base64.
"""

from __future__ import annotations

import re
from typing import Any

from longhaul.agent.images import data_url, offload_images, sniff
from longhaul.agent.tools.result import ToolResult
from longhaul.agent.turn import Turn

SHOWN = "images"
"""``name`` of the synthetic user message that carries shown images."""


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_=-]", "_", part) or "_"


async def store_attachments(
    turn: Turn, call_id: str, result: ToolResult, shown: list[dict[str, Any]]
) -> str:
    """Text to append to the tool message (empty without attachments); the image parts of
    attachments to show are appended to ``shown``."""
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
        media = sniff(item.data) if item.show else None
        if media is not None:
            shown.append({"type": "text", "text": f"[{item.name}, from tool call {call_id}]"})
            shown.append({"type": "image_url", "image_url": {"url": data_url(media, item.data)}})
            lines.append("the image follows in the next message")
    return "\n\n" + "\n".join(lines)


async def show_images(turn: Turn, shown: list[dict[str, Any]]) -> None:
    """The synthetic user message carrying ``shown`` (nothing when empty)."""
    workspace = turn.env.workspace
    if not shown or workspace is None:
        return
    [message] = await offload_images(
        [{"role": "user", "content": shown}], turn.state.owner, workspace.put
    )
    batch = turn.batch()
    batch.message("user", content=message["content"], name=SHOWN, synthetic=True)
    await turn.emit(batch)
