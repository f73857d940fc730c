"""The configuration reference (docs/10-operations.md, wherever the docs put the table) states
the defaults the code has (issue 24 item 8)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from longhaul.core.config import LonghaulConfig

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^\| `(?P<keys>(?:pipeline|gateway|store|sandbox|spend_limits)\.[^|]*)\| (?P<default>[^|]+) \|"
)


def _value(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(text: str) -> str:
    text = text.strip().strip("`")
    units = {"MiB": 1024**2, "GiB": 1024**3}
    for unit, factor in units.items():
        if text.endswith(unit):
            return str(int(text[: -len(unit)].strip()) * factor)
    return text.replace(",", "")


def test_the_configuration_table_matches_the_defaults() -> None:
    config = LonghaulConfig()
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    lines = [line for page in pages for line in page.read_text(encoding="utf-8").splitlines()]
    rows = [ROW.match(line) for line in lines]
    checked = []
    for row in filter(None, rows):
        keys = [k.strip().strip("`") for k in row["keys"].split("/")]
        first = keys[0]
        base = first.rsplit(".", 1)[0]
        dotted = [first] + [base + k if k.startswith(".") else k for k in keys[1:]]
        defaults = [_number(d) for d in row["default"].split(" / ")]
        assert len(defaults) == len(dotted), row.group(0)
        for key, shown in zip(dotted, defaults, strict=True):
            assert _shown(_value(config, key)) == shown, (key, shown)
            checked.append(key)
    assert "pipeline.streaming.flush_interval_ms" in checked
    assert {"spend_limits.default.month", "spend_limits.keys_answer"} <= set(checked)
    assert len(checked) >= 20
