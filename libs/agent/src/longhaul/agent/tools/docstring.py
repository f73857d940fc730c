"""Google-style docstrings split into a description and per-argument help.

Only what schema building needs: the text before the first section header is the tool's
description; ``Args:`` entries (``name: help`` or ``name (type): help``, continuation lines
indented) become parameter descriptions.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(slots=True)
class Docstring:
    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line)
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            match = _ARG.match(line.strip())
            if match and not line.startswith((" " * 8, "\t\t")):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    paragraphs = re.split(r"\n\s*\n", "\n".join(description).strip())
    text = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return Docstring(description=text, params=params)
