"""The quick variant of ``make chaos provider-down``: the primary provider answers 503 for 5 s
while 4 traces are mid-run under ``longhaul up``. Every trace that met the outage moves to the
fallback (a ``model_switched`` on its log) and finishes there; no step is lost, answered twice
or run twice. One retry with a short backoff, so every call in the outage falls through
within it. In the same stack, another key reaches its daily token limit: its traces ask (a
``budget`` wait), none fails, and the key spends past the limit by at most one call each."""

from __future__ import annotations

from pathlib import Path

from tests.chaos.provider_down import FALLBACK, PRIMARY, render_outage, run_provider_down
from tests.chaos.spend_rider import MAIN_KEY, SpendRider


async def test_a_provider_down_mid_run_moves_every_trace_to_its_fallback(tmp_path: Path) -> None:
    spend = SpendRider(tmp_path, FALLBACK, traces=2, day_tokens=1500)
    out = await run_provider_down(
        tmp_path,
        traces=4,
        steps=6,
        hold_ms=50,
        outage_s=5.0,
        lead_steps=1,
        provider={"max_retries": 1, "retry_base_delay_s": 0.1},
        riders=[spend],
        api_key=MAIN_KEY,
    )
    table = render_outage(out, f"provider-down {PRIMARY} → {FALLBACK}") + "\n" + spend.summary()
    print(table)
    assert not out.problems, table
    assert out.row.finished == out.row.aggregates == 4, table
    assert (out.row.lost, out.row.duplicated, out.row.unpaired, out.row.run_twice) == (0, 0, 0, 0)
    assert out.mid_run >= 1, table  # the outage met running traces
    assert out.switched == out.mid_run == out.on_fallback, table
    assert out.unlogged == 0 and out.primary_during >= 1, table
    assert out.clean, table
    assert spend.asking == spend.traces and 0 < spend.spent <= spend.bound, table
