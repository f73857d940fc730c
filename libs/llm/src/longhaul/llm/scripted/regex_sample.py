"""A string matching a regular expression, for JSON-schema ``pattern``.

Walks the parse tree of Python's own regex parser and takes the first, shortest choice at
every node; ``stretch`` repeats quantified parts more often, to meet a ``minLength``.
Lookarounds and conditionals are not modelled, so the result is always checked by the caller.
"""

from __future__ import annotations

import importlib
from typing import Any

_parser: Any = importlib.import_module("re._parser")  # also exports every opcode

_POOL = "ax0A_-. 1bZ"
_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0",
    "CATEGORY_NOT_DIGIT": "a",
    "CATEGORY_WORD": "a",
    "CATEGORY_NOT_WORD": "-",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "a",
}


def _in_category(ch: str, category: Any) -> bool:
    name = str(category)
    tests = {
        "CATEGORY_DIGIT": ch.isdigit(),
        "CATEGORY_WORD": ch.isalnum() or ch == "_",
        "CATEGORY_SPACE": ch.isspace(),
    }
    positive = name.replace("NOT_", "")
    result = tests.get(positive, False)
    return not result if "NOT_" in name else result


def _in_set(ch: str, items: list[tuple[Any, Any]]) -> bool:
    negate = False
    found = False
    for op, value in items:
        if op is _parser.NEGATE:
            negate = True
        elif op is _parser.LITERAL:
            found = found or ord(ch) == value
        elif op is _parser.RANGE:
            found = found or value[0] <= ord(ch) <= value[1]
        elif op is _parser.CATEGORY:
            found = found or _in_category(ch, value)
    return found != negate


def _set_char(items: list[tuple[Any, Any]]) -> str:
    candidates = []
    for op, value in items:
        if op is _parser.LITERAL:
            candidates.append(chr(value))
        elif op is _parser.RANGE:
            candidates.append(chr(value[0]))
        elif op is _parser.CATEGORY:
            candidates.append(_CATEGORY_CHARS.get(str(value), "a"))
    for ch in [*candidates, *_POOL]:
        if _in_set(ch, items):
            return ch
    return "a"


def _emit(items: Any, stretch: int, groups: dict[int, str]) -> str:
    out = []
    for op, value in items:
        if op is _parser.LITERAL:
            out.append(chr(value))
        elif op is _parser.NOT_LITERAL:
            out.append("a" if value != ord("a") else "b")
        elif op is _parser.ANY:
            out.append("a")
        elif op is _parser.IN:
            out.append(_set_char(value))
        elif op is _parser.BRANCH:
            out.append(_emit(value[1][0], stretch, groups))
        elif op is _parser.SUBPATTERN:
            text = _emit(value[3], stretch, groups)
            if value[0] is not None:
                groups[value[0]] = text
            out.append(text)
        elif op is _parser.ATOMIC_GROUP:
            out.append(_emit(value, stretch, groups))
        elif op in (_parser.MAX_REPEAT, _parser.MIN_REPEAT, _parser.POSSESSIVE_REPEAT):
            low, high, body = value
            count = low if high == low else min(low + stretch, high)
            out.append("".join(_emit(body, stretch, groups) for _ in range(count)))
        elif op is _parser.GROUPREF:
            out.append(groups.get(value, ""))
    return "".join(out)


def regex_sample(pattern: str, stretch: int = 0) -> str:
    return _emit(_parser.parse(pattern), stretch, {})
