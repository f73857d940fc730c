"""``models.local.chat_template`` names a packaged template or a file, and says which when
it can read neither."""

from __future__ import annotations

from pathlib import Path

import pytest
from longhaul.domain.config import LocalModelConfig
from longhaul.llm.local import PACKAGED_TEMPLATES, ServerSpec, chat_template_text


def test_the_packaged_template_shows_tools_as_hermes_blocks() -> None:
    assert PACKAGED_TEMPLATES == ("hermes-tools",)
    text = chat_template_text("hermes-tools")
    assert "<tool_call>" in text and "tools" in text


def test_a_path_is_read_as_the_template(tmp_path: Path) -> None:
    own = tmp_path / "own.jinja"
    own.write_text("{{ messages }}")
    spec = ServerSpec.from_config(tmp_path / "m.gguf", LocalModelConfig(chat_template=str(own)))
    assert spec.chat_template == "{{ messages }}"


def test_an_unreadable_template_names_the_setting_and_the_packaged_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"models\.local\.chat_template.*hermes-tools"):
        chat_template_text(str(tmp_path / "missing.jinja"))
