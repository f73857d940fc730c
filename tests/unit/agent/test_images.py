"""Image references (``longhaul.agent.images``): only long ``data:`` URLs leave the message,
http URLs and small images stay inline, and resolving reads the owner's own key."""

from __future__ import annotations

from typing import Any

from longhaul.agent.images import INLINE_LIMIT, MISSING, SCHEME, offload_images, resolve_images


class Store:
    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    async def put(self, key: str, value: bytes) -> None:
        self.values[key] = value

    async def get(self, key: str) -> bytes | None:
        return self.values.get(key)


def message(*urls: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "look"}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return {"role": "user", "content": parts}


BIG = "data:image/png;base64," + "A" * (INLINE_LIMIT + 4)
SMALL = "data:image/png;base64,AAAA"
HTTP = "https://images.example/cat.png"


async def test_only_long_data_urls_are_stored_and_they_come_back() -> None:
    store = Store()
    [sent] = await offload_images([message(BIG, SMALL, HTTP)], "k_owner", store.put)
    urls = [part["image_url"]["url"] for part in sent["content"][1:]]
    assert urls[0].startswith(SCHEME) and urls[1:] == [SMALL, HTTP]
    assert list(store.values) == [f"images/k_owner/{urls[0].removeprefix(SCHEME)}"]
    cache: dict[str, str] = {}
    [back] = await resolve_images([sent], "k_owner", store, cache)
    assert back == message(BIG, SMALL, HTTP) and sent["content"][1]["image_url"]["url"] == urls[0]
    assert len(cache) == 1


async def test_another_owner_gets_a_note_instead() -> None:
    store = Store()
    [sent] = await offload_images([message(BIG)], "k_owner", store.put)
    [other] = await resolve_images([sent], "k_other", store, {})
    assert other["content"][1] == {"type": "text", "text": MISSING}


async def test_messages_without_references_are_returned_as_they_are() -> None:
    messages = [message(SMALL), {"role": "assistant", "content": "ok"}]
    assert await resolve_images(messages, None, Store(), {}) is messages
