"""Ids: ULIDs in Crockford base32 (26 characters, time first, so they sort by creation)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from longhaul.domain.ids import is_valid_id, new_id, ulid_text

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
BITS_128 = st.integers(min_value=0, max_value=2**128 - 1)


def reference(value: int) -> str:
    """The ULID text of a 128-bit value, five bits at a time from the low end."""
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


@given(BITS_128)
def test_the_text_is_crockford_base32_of_the_128_bits(value: int) -> None:
    assert ulid_text(value) == reference(value)


@given(BITS_128, BITS_128)
def test_texts_sort_as_their_values(a: int, b: int) -> None:
    assert (ulid_text(a) < ulid_text(b)) == (a < b)


def test_new_ids_are_safe_in_subjects() -> None:
    made = {new_id("t") for _ in range(1000)}
    assert len(made) == 1000
    assert all(is_valid_id(i, "t") and len(i) == len("t_") + 26 for i in made)
