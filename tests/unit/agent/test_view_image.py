"""``view_image``: a working-directory image reaches the model as an image part of a synthetic
user message after the call group (the event carries a reference for a big one), and every
way out of the working directory or around the type and size checks is refused."""

from __future__ import annotations

import base64
import os
import zlib
from pathlib import Path

import msgspec
import pytest
from longhaul.agent import ToolError, ToolRegistry
from longhaul.agent.images import SCHEME, sniff
from longhaul.agent.tools import ToolResult
from longhaul.agent.tools.settings import ToolSettings
from longhaul.agent.tools.view_image import view_image
from longhaul.agent.tools.workspace_read import workspace_read
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
    tool_context,
    trace_dir,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16
GIF = b"GIF89a" + b"\x00" * 16
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 8


def test_media_types_are_judged_by_magic_bytes() -> None:
    assert [sniff(data) for data in (PNG, JPEG, GIF, WEBP)] == [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    ]
    assert sniff(b"<svg xmlns='http://www.w3.org/2000/svg'/>") is None
    assert sniff(b"RIFF\x10\x00\x00\x00WAVEfmt ") is None


def image_urls(message: dict) -> list[str]:
    return [p["image_url"]["url"] for p in message["content"] if p.get("type") == "image_url"]


async def test_the_image_follows_the_call_group_and_reaches_the_model(tmp_path: Path) -> None:
    home = trace_dir(tmp_path)
    small = home / "small.png"
    small.write_bytes(PNG)
    big = home / "shots" / "big.png"
    big.parent.mkdir()
    big_data = PNG + zlib.compress(os.urandom(40_000), 0)  # incompressible: a long data URL
    big.write_bytes(big_data)
    workspace = MemoryWorkspace()
    model, script = scripted(
        calls(
            call("view_image", {"path": "small.png"}, id="v1"),
            call("view_image", {"path": "shots/big.png"}, id="v2"),
            call("workspace_read", {"key": "nothing"}, id="w3"),
        ),
        answer("a black square"),
    )
    state = new_state(config=ev.TraceConfig(preset="browser"))
    sink = MemorySink(state)
    tools = ToolRegistry([view_image, workspace_read])
    engine = make_engine(tmp_path, tools=tools, workspace=workspace)
    await engine.run_turn(state, sink, model=model)

    messages = [m for m in sink.of_type(ev.MessageAppended) if m.branch_type == "main"]
    roles = [(m.role, m.name) for m in messages]
    assert roles[-5:] == [
        ("tool", "view_image"),
        ("tool", "view_image"),
        ("tool", "workspace_read"),
        ("user", "images"),
        ("assistant", None),
    ]
    shown = messages[-2]
    assert shown.synthetic
    stored = image_urls(shown.to_openai())
    assert stored[0].startswith("data:image/png;base64,")  # small: inline
    assert stored[1].startswith(SCHEME)  # big: by reference, the event stays small
    assert len(msgspec_size(shown)) < 2_000
    # the model got both images as data URLs, after the three tool results
    sent = script.requests[-1].messages
    last_user = sent[-1]
    assert [m["role"] for m in sent[-4:]] == ["tool", "tool", "tool", "user"]
    urls = image_urls(last_user)
    assert urls[0] == stored[0] and urls[1].startswith("data:image/png;base64,")
    assert base64.b64decode(urls[1].split(",", 1)[1]) == big_data
    texts = [p["text"] for p in last_user["content"] if p.get("type") == "text"]
    assert texts == ["[small.png, from tool call v1]", "[shots_big.png, from tool call v2]"]


def msgspec_size(event: ev.MessageAppended) -> bytes:
    return msgspec.json.encode(event)


async def test_not_offered_by_the_default_preset(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(PNG)
    model, script = scripted(answer("no tools"))
    state = new_state()
    engine = make_engine(tmp_path, tools=ToolRegistry([view_image, workspace_read]))
    await engine.run_turn(state, MemorySink(state), model=model)
    assert [spec.name for spec in script.requests[0].tools or []] == ["workspace_read"]


async def refused(tmp_path: Path, path: str, settings: ToolSettings | None = None) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await view_image.run(tool_context(tmp_path, settings=settings), {"path": path})
    return caught.value


async def test_paths_out_of_the_working_directory_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    secret = tmp_path / "secret.png"
    secret.write_bytes(PNG)
    (root / "out.png").symlink_to(secret)
    (root / "outdir").symlink_to(tmp_path)
    os.link(secret, root / "hard.png")
    for path in (
        str(secret),
        "/etc/passwd",
        "../secret.png",
        "sub/../../secret.png",
        "out.png",
        "outdir/secret.png",
        "hard.png",
        "~/secret.png",
    ):
        error = await refused(root, path)
        assert error.code == "path_outside_workdir", path


async def test_a_symlink_inside_the_directory_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real.png").write_bytes(PNG)
    (tmp_path / "alias.png").symlink_to(tmp_path / "real.png")
    result = await view_image.run(tool_context(tmp_path), {"path": "alias.png"})
    assert isinstance(result, ToolResult)
    assert result.attachments[0].data == PNG and result.attachments[0].show


async def test_type_and_size_are_checked(tmp_path: Path) -> None:
    (tmp_path / "fake.png").write_text("<html>not an image</html>")
    (tmp_path / "big.png").write_bytes(PNG + b"\x00" * 100)
    (tmp_path / "dir.png").mkdir()
    os.mkfifo(tmp_path / "pipe.png")  # opening must not block
    assert (await refused(tmp_path, "fake.png")).code == "not_an_image"
    assert (await refused(tmp_path, "big.png", ToolSettings(image_max_bytes=64))).code == (
        "image_too_large"
    )
    assert (await refused(tmp_path, "dir.png")).code == "tool_call_invalid"
    assert (await refused(tmp_path, "pipe.png")).code == "tool_call_invalid"
    assert (await refused(tmp_path, "missing.png")).code == "not_found"
    for data, media in ((JPEG, "image/jpeg"), (GIF, "image/gif"), (WEBP, "image/webp")):
        (tmp_path / "pic").write_bytes(data)
        result = await view_image.run(tool_context(tmp_path), {"path": "pic"})
        assert isinstance(result, ToolResult)
        assert result.attachments[0].media_type == media
