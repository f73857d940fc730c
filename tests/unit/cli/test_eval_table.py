"""The eval table keeps each model's name whole at 80 columns (the other columns wrap)."""

from __future__ import annotations

from longhaul.cli.evals import table
from rich.console import Console

MODEL = "openai:gpt-4o-mini-2024-07-18"


def test_the_eval_table_never_cuts_a_model_at_80_columns() -> None:
    numbers = {
        "passed": 9, "total": 9, "pass_rate": 1.0, "ci_low": 0.7, "ci_high": 1.0,
        "tokens_median": 1234, "tokens_p90": 2345, "cost_total": 0.0123,
        "duration_median_s": 1.2, "duration_p90_s": 3.4, "model_calls_median": 3,
        "model_calls_p90": 5, "recovered": 0,
    }  # fmt: skip
    document = {"eval_id": "ev_1", "suite": "suite.yaml", "summary": {MODEL: numbers}}
    console = Console(width=80, record=True)
    console.print(table(document))
    text = console.export_text()
    assert MODEL in text
    assert max(len(line) for line in text.splitlines()) <= 80
