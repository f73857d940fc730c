"""Sortable unique ids (ULID layout: 48-bit millisecond time + 80 random bits, Crockford base32)."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid() -> str:
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    """``prefix_<ulid>``; ids are safe in NATS subjects and KV keys (no dots, no spaces)."""
    return f"{prefix}_{ulid()}"


def is_valid_id(value: str, prefix: str | None = None) -> bool:
    """True for ids that are safe to put in a subject: ``[A-Za-z0-9_-]``, 1..128 chars."""
    if not 0 < len(value) <= 128:
        return False
    if prefix is not None and not value.startswith(prefix + "_"):
        return False
    return all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in value)
