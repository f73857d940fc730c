"""``retention``: durations as operators write them, none by default, bad ones refused with
the key named."""

from __future__ import annotations

import pytest
from longhaul.core.config import LonghaulConfig, RetentionConfig
from pydantic import ValidationError


def test_no_retention_by_default() -> None:
    retention = LonghaulConfig().retention
    assert [retention.keep_s(s) for s in ("completed", "failed", "stopped")] == [None] * 3


def test_durations_in_days_hours_minutes_seconds_weeks() -> None:
    retention = RetentionConfig.model_validate(
        {"completed": "30d", "failed": "1.5h", "stopped": "2w"}
    )
    assert retention.keep_s("completed") == 30 * 86_400
    assert retention.keep_s("failed") == 5_400
    assert retention.keep_s("stopped") == 14 * 86_400
    assert retention.keep_s("running") is None
    assert RetentionConfig.model_validate({"completed": 90}).keep_s("completed") == 90


@pytest.mark.parametrize("bad", ["30 days", "d", "0s", -5, "1y"])
def test_a_bad_duration_is_refused_naming_the_key(bad: object) -> None:
    with pytest.raises(ValidationError, match="completed"):
        RetentionConfig.model_validate({"completed": bad})
