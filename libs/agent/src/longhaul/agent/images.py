"""Image parts of messages stay out of events: large ``data:`` URLs live in the workspace.

A user message may carry OpenAI ``image_url`` parts. An event carries the new message, and a
base64 image is easily hundreds of kilobytes, so the gateway stores every ``data:`` URL longer
than :data:`INLINE_LIMIT` in the workspace (past the KV's size limit, in the object store)
under ``images/<owner>/<sha256>`` and the event's part names it as ``longhaul-image:<sha256>``.
Before each model call the engine puts the data URL back (:func:`resolve_images`), reading
the key of the trace's own owner: a reference can never reach another API key's image. An
http(s) URL is passed on as it is (each provider fetches or names it).
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from longhaul.agent.workspace import Workspace
from longhaul.llm.types import ModelRequest

if TYPE_CHECKING:
    from longhaul.agent.turn import Turn

SCHEME = "longhaul-image:"
INLINE_LIMIT = 16 * 1024
"""Characters of a ``data:`` URL kept inline in the event."""
MISSING = "[an image of this message is no longer available]"


MEDIA_TYPES = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}
"""Leading bytes of the image formats every provider accepts (WebP: see :func:`sniff`)."""


def sniff(data: bytes) -> str | None:
    """The media type of a PNG, JPEG, GIF or WebP image by its magic bytes, else ``None``
    (a file's name or a server's header is not trusted)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((media for magic, media in MEDIA_TYPES.items() if data.startswith(magic)), None)


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def image_key(owner: str | None, digest: str) -> str:
    return f"images/{owner or '_'}/{digest}"


def _image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        part
        for part in content
        if isinstance(part, dict)
        and part.get("type") == "image_url"
        and isinstance(part.get("image_url"), dict | str)
    ]


def _url(part: dict[str, Any]) -> str:
    """The URL of an ``image_url`` part ("" for any other part)."""
    ref = part.get("image_url") if part.get("type") == "image_url" else None
    url = ref.get("url") if isinstance(ref, dict) else ref
    return url if isinstance(url, str) else ""


def _set_url(part: dict[str, Any], url: str) -> None:
    if isinstance(part["image_url"], dict):
        part["image_url"]["url"] = url
    else:
        part["image_url"] = {"url": url}


async def offload_images(
    messages: list[dict[str, Any]],
    owner: str | None,
    put: Callable[[str, bytes], Awaitable[object]],
) -> list[dict[str, Any]]:
    """``messages`` with every long ``data:`` URL stored and replaced by its reference."""
    for message in messages:
        for part in _image_parts(message):
            url = _url(part)
            if url.startswith("data:") and len(url) > INLINE_LIMIT:
                data = url.encode()
                digest = hashlib.sha256(data).hexdigest()
                await put(image_key(owner, digest), data)
                _set_url(part, SCHEME + digest)
    return messages


async def resolve_images(
    messages: Sequence[dict[str, Any]],
    owner: str | None,
    workspace: Workspace | None,
    cache: dict[str, str],
) -> Sequence[dict[str, Any]]:
    """``messages`` with each reference replaced by its data URL (``cache``: digest → URL,
    kept by the caller for the turn); the same sequence when none refers to an image."""
    if not any(_url(part).startswith(SCHEME) for m in messages for part in _image_parts(m)):
        return messages
    resolved = []
    for message in messages:
        refs = [part for part in _image_parts(message) if _url(part).startswith(SCHEME)]
        if not refs:
            resolved.append(message)
            continue
        message = copy.deepcopy(message)
        content = message["content"]
        for index, part in enumerate(content):
            if not isinstance(part, dict) or not _url(part).startswith(SCHEME):
                continue
            digest = _url(part).removeprefix(SCHEME)
            if digest not in cache and workspace is not None:
                data = await workspace.get(image_key(owner, digest))
                if data is not None:
                    cache[digest] = data.decode()
            if digest in cache:
                _set_url(part, cache[digest])
            else:
                content[index] = {"type": "text", "text": MISSING}
        resolved.append(message)
    return resolved


async def with_images(request: ModelRequest, turn: Turn) -> ModelRequest:
    """``request`` with the images its messages name put back (every model call of a turn:
    the loop's, compaction's, reflection's)."""
    if not turn.state.image_messages:
        return request
    messages = await resolve_images(
        request.messages, turn.state.owner, turn.env.workspace, turn.images
    )
    if messages is request.messages:
        return request
    return msgspec.structs.replace(request, messages=messages)
