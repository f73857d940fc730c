"""``view_image``: show the model an image file of the working directory.

The path goes through the working-directory jail (absolute paths, ``..``, symlinks and hard
links leading out are refused), the file is opened without following a final symlink and
without blocking on a FIFO, must be a regular file no bigger than ``image_max_bytes``, and
must be a PNG, JPEG, GIF or WebP by its magic bytes. The image reaches the model as an
attachment marked ``show`` (see :mod:`longhaul.agent.engine.attachments`).
"""

from __future__ import annotations

import asyncio
import errno
import os
import stat

from longhaul.agent.errors import ToolError
from longhaul.agent.images import sniff
from longhaul.agent.tools.base import tool
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.jail import jailed, relative
from longhaul.agent.tools.result import Attachment, ToolResult


def _read(path: str, limit: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise ToolError("no such file", code="not_found") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component became a symlink after the check
            raise ToolError("it is a symlink", code="path_outside_workdir") from exc
        raise ToolError(f"cannot open it: {exc.strerror}", code="read_failed") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolError("not a regular file", code="tool_call_invalid")
    if info.st_nlink > 1:  # became a hard link after the check
        os.close(fd)
        raise ToolError("it is a hard link", code="path_outside_workdir")
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > limit:
            raise ToolError(
                f"{info.st_size} bytes; images up to {limit} bytes can be shown",
                code="image_too_large",
            )
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
        data = await asyncio.to_thread(_read, str(resolved), ctx.settings.image_max_bytes)
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
