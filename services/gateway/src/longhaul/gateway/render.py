"""Text of a chat message's content, whichever shape it has (string or content parts)."""

from __future__ import annotations

import json
from typing import Any


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = [str(part.get("text", "")) for part in content if part.get("type", "text") == "text"]
    return "\n".join(t for t in texts if t) or json.dumps(content)
