"""Sortable unique ids (ULID layout: 48-bit millisecond time + 80 random bits, Crockford base32)."""

from __future__ import annotations

import os
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [high + low for high in _ALPHABET for low in _ALPHABET]
"""The two digits of every 10-bit value."""
_SHIFTS = tuple(range(120, -1, -10))


def ulid() -> str:
    return ulid_text((int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big"))


def ulid_text(value: int) -> str:
    """The 26 Crockford base32 digits of a 128-bit value."""
    # Two digits per lookup, 13 lookups (ids are made for every event appended): a third of
    # base64.b32encode's time, which is pure Python before 3.13.
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


def new_id(prefix: str) -> str:
    """``prefix_<ulid>``; ids are safe in NATS subjects and KV keys (no dots, no spaces)."""
    return f"{prefix}_{ulid()}"


_INCARNATION: list[str] = []


def process_incarnation() -> str:
    """This process's incarnation: ``LONGHAUL_INCARNATION`` when a supervisor set one (it
    names the incarnation when it reports the process dead), else one made up at first use.
    Leases and in-flight work carry it, so a successor under the same service id can tell its
    dead predecessor's holdings from its own."""
    if not _INCARNATION:
        _INCARNATION.append(os.environ.get("LONGHAUL_INCARNATION") or new_id("inc"))
    return _INCARNATION[0]


def is_valid_id(value: str, prefix: str | None = None) -> bool:
    """True for ids that are safe to put in a subject: ``[A-Za-z0-9_-]``, 1..128 chars."""
    if not 0 < len(value) <= 128:
        return False
    if prefix is not None and not value.startswith(prefix + "_"):
        return False
    return all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in value)
