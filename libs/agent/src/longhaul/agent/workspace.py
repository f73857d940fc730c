"""The workspace as the engine sees it: bytes by key, nothing about KV or object stores.

The executor implements this over JetStream KV (with
large values offloaded); tests use a dict. Keys are ``/``-separated
(``task/<id>/phase/<pid>/output``).
"""

from __future__ import annotations

from typing import Protocol


class Workspace(Protocol):
    async def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, or ``None`` if there is none."""
        ...

    async def put(self, key: str, value: bytes) -> None:
        """Store ``value`` under ``key`` (last writer wins)."""
        ...
