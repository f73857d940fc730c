"""SSE framing and tool-argument parsing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from longhaul.llm import InvalidToolArguments, parse_arguments
from longhaul.llm.arguments import arguments_object
from longhaul.llm.sse import SSEEvent, iter_sse


async def lines(*items: str) -> AsyncIterator[str]:
    for item in items:
        yield item


async def test_sse_events_comments_and_multiline_data() -> None:
    source = lines(
        ": keep-alive",
        "event: message_start",
        'data: {"a":',
        "data: 1}",
        "",
        "retry: 10",
        "data:[DONE]",
        "",
        "",
        "event: tail",
        "data: last",
    )
    events = [event async for event in iter_sse(source)]
    assert events == [
        SSEEvent("message_start", '{"a":\n1}'),
        SSEEvent("message", "[DONE]"),
        SSEEvent("tail", "last"),
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        ("  ", {}),
    ],
)
def test_parse_arguments(raw: str, expected: dict[str, int]) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize("raw", ['{"a": ', "[1, 2]", "null", "{'a': 1}"])
def test_invalid_arguments_raise_a_typed_error_keeping_the_text(raw: str) -> None:
    with pytest.raises(InvalidToolArguments) as caught:
        parse_arguments(raw)
    assert caught.value.raw == raw and isinstance(caught.value, ValueError)
    assert arguments_object(raw) == {"_raw_arguments": raw}
