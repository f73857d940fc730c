"""The header parser speed-up must behave exactly like nats-py's own."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from longhaul.core.nats_speedups import original_parse_header_lines, parse_header_lines

_pieces = st.sampled_from(
    [
        b"Nats-Msg-Id",
        b":",
        b" ",
        b"\t",
        b"\r\n",
        b"\x1c",
        b"value",
        b"\xc3\xa9",
        b"\xff",
        b"a b",
        b"Status",
        b"204",
        b"",
        b"::",
        b"\x0b",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_pieces, max_size=30).map(b"".join))
def test_same_result_as_nats_py(raw: bytes) -> None:
    assert parse_header_lines(raw) == original_parse_header_lines(raw)


def test_typical_block() -> None:
    raw = b"Nats-Stream: LH_EVENTS\r\nNats-Sequence: 42\r\nNats-Msg-Id: t_1:3\r\n\r\n"
    assert parse_header_lines(raw) == {
        "Nats-Stream": "LH_EVENTS",
        "Nats-Sequence": "42",
        "Nats-Msg-Id": "t_1:3",
    }
