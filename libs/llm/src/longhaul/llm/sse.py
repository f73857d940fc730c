"""Server-sent events, as all three HTTP providers stream them.

Implements the parts of the WHATWG event-stream format the model APIs use: ``event:`` and
multi-line ``data:`` fields, comments, and blank-line dispatch. Line splitting (``\\n``,
``\\r\\n``, ``\\r``) is httpx's job.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str


async def iter_sse(lines: AsyncIterator[str]) -> AsyncGenerator[SSEEvent, None]:
    event = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SSEEvent(event or "message", "\n".join(data))
