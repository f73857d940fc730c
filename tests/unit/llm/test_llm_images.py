"""Image parts of user messages (OpenAI ``image_url``: data URLs and http URLs) reach each
provider in its own shape — OpenAI as sent, Anthropic image blocks (base64 or url source),
Gemini ``inlineData`` / ``fileData`` — against the strict fakes, which refuse malformed ones."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from longhaul.llm import ModelRegistry, ModelRequest
from longhaul.llm.alternation import Image, group_by_role

from tests.support.llm_fakes import FakeAnthropic, FakeGemini, FakeOpenAI, FakeServer, Reply
from tests.unit.llm.conftest import drain

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake image bytes").decode()
DATA_URL = f"data:image/png;base64,{PNG}"
HTTP_URL = "https://images.example/cat.webp?size=large"
MESSAGES: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is in these pictures?"},
            {"type": "image_url", "image_url": {"url": DATA_URL}},
            {"type": "image_url", "image_url": {"url": HTTP_URL, "detail": "low"}},
        ],
    }
]
MODELS = {
    "openai": (FakeOpenAI, "openai:gpt-4o"),
    "anthropic": (FakeAnthropic, "anthropic:claude-sonnet-4-5"),
    "gemini": (FakeGemini, "gemini:gemini-2.5-flash"),
}


async def sent_body(registry: ModelRegistry, provider: str) -> dict[str, Any]:
    fake_class, model_name = MODELS[provider]
    server: FakeServer
    async with fake_class([Reply(text="a cat")]) as server:
        model = registry.resolve(model_name, server.models_config())
        events = await drain(model, ModelRequest(model=model_name, messages=MESSAGES))
    assert not server.rejected
    assert events[-1].response.content == "a cat"  # type: ignore[union-attr]
    body: dict[str, Any] = server.requests[0].json
    return body


async def test_openai_gets_the_parts_as_sent(registry: ModelRegistry) -> None:
    body = await sent_body(registry, "openai")
    [user] = [m for m in body["messages"] if m["role"] == "user"]
    parts = user["content"] if isinstance(user["content"], list) else []
    assert {"type": "image_url", "image_url": {"url": DATA_URL}} in parts
    assert {"type": "image_url", "image_url": {"url": HTTP_URL, "detail": "low"}} in parts


async def test_anthropic_gets_image_blocks(registry: ModelRegistry) -> None:
    body = await sent_body(registry, "anthropic")
    blocks = body["messages"][0]["content"]
    images = [block for block in blocks if block["type"] == "image"]
    assert images[0]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}
    assert images[1]["source"] == {"type": "url", "url": HTTP_URL}
    assert any(block.get("text") == "what is in these pictures?" for block in blocks)


async def test_gemini_gets_inline_and_file_data(registry: ModelRegistry) -> None:
    body = await sent_body(registry, "gemini")
    parts = body["contents"][0]["parts"]
    assert {"inlineData": {"mimeType": "image/png", "data": PNG}} in parts
    assert {"fileData": {"mimeType": "image/webp", "fileUri": HTTP_URL}} in parts
    assert {"text": "what is in these pictures?"} in parts


@pytest.mark.parametrize(
    ("url", "inline", "media_type"),
    [
        (DATA_URL, ("image/png", PNG), "image/png"),
        ("data:image/jpeg;base64,AAAA", ("image/jpeg", "AAAA"), "image/jpeg"),
        ("data:,plain", None, "text/plain"),
        ("http://x.example/a.gif", None, "image/gif"),
    ],
)
def test_image_urls_are_parsed(url: str, inline: tuple[str, str] | None, media_type: str) -> None:
    image = Image(url)
    assert image.inline == inline and image.media_type == media_type


def test_images_stay_on_their_user_turn() -> None:
    turns = group_by_role(
        [
            *MESSAGES,
            {"role": "assistant", "content": "a cat"},
            {"role": "user", "content": [{"type": "image_url", "image_url": DATA_URL}]},
        ]
    )
    assert [len(turn.images) for turn in turns] == [2, 0, 1]
    assert turns[2].texts == []


async def test_the_fakes_refuse_a_bad_image(registry: ModelRegistry) -> None:
    bad = [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": "data:image/bmp;base64,AAAA"}],
        }
    ]
    async with FakeAnthropic([Reply(text="never")]) as server:
        model = registry.resolve("anthropic:claude-sonnet-4-5", server.models_config(max_retries=0))
        with pytest.raises(Exception, match="media_type"):
            await drain(model, ModelRequest(model="anthropic:claude-sonnet-4-5", messages=bad))
    assert server.rejected
