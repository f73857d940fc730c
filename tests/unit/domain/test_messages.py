"""``content_text``: the one helper every layer uses to read a message content as text."""

from __future__ import annotations

from longhaul.domain.messages import content_text


def test_every_content_shape_reads_as_text() -> None:
    assert content_text(None) == ""
    assert content_text("plain") == "plain"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"text": "b"}]
    assert content_text(parts) == "ab"
    assert content_text({"k": 1}) == '{"k": 1}'
