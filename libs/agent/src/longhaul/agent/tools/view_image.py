"""``view_image``: show the model an image file of the working directory.

The path goes through the working-directory jail (absolute paths, ``..``, symlinks and hard
links leading out are refused), the file is opened without following a final symlink and
without blocking on a FIFO, must be a regular file no bigger than ``image_max_bytes``, and
must be a PNG, JPEG, GIF or WebP by its magic bytes. The image reaches the model as an
attachment marked ``show`` (see :mod:`longhaul.agent.engine.attachments`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from longhaul.agent.errors import ToolError
from longhaul.agent.images import sniff
from longhaul.agent.tools import confined_paths
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.jail import jailed, relative
from longhaul.agent.tools.result import Attachment, ToolResult


def _read(root: Path, path: str, limit: int) -> bytes:
    """The image's bytes, opened beneath the working directory (see ``confined_paths``)."""
    with confined_paths.root(root) as root_dir, confined_paths.opened(root_dir, path) as fd:
        size = os.fstat(fd).st_size
        if size > limit:
            raise ToolError(
                f"{size} bytes; images up to {limit} bytes can be shown", code="image_too_large"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    if len(data) > limit:
        raise ToolError(f"more than {limit} bytes", code="image_too_large")
    return data


@tool(read_only=True, path_params=("path",))
async def view_image(ctx: ToolContext, path: str) -> ToolResult:
    """Look at an image file (PNG, JPEG, GIF or WebP) of the working directory: the image is
    shown to you in the next message.

    Args:
        path: the image's path relative to the working directory.
    """
    resolved = jailed(ctx.working_dir, path)
    try:
        data = await asyncio.to_thread(_read, ctx.working_dir, path, ctx.settings.image_max_bytes)
    except ToolError as exc:
        raise ToolError(f"{path}: {exc}", code=exc.code) from exc
    media = sniff(data)
    if media is None:
        raise ToolError(
            f"{path} is not a PNG, JPEG, GIF or WebP image (judged by its content)",
            code="not_an_image",
        )
    name = relative(ctx.working_dir, resolved)
    return ToolResult(
        output=f"{name}: {media}, {len(data)} bytes",
        title=f"view {name}",
        attachments=(Attachment(name.replace("/", "_"), data, media, show=True),),
    )
