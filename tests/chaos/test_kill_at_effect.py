"""Effects happen once (issue 35): executors killed -9 while payments are in flight; the
payment service ends with exactly one charge, refund and payout per logical call, every trace
completes with its calls paired, and each way of resuming a cut-off call is exercised — an
idempotent re-run with the call's own key, the refund's reconcile hook, a person's decision.
``make chaos`` runs the same scenario with more kills."""

from __future__ import annotations

import time
from pathlib import Path

from tests.chaos.effects import render_effects, run_kill_at_effect


async def test_kills_while_payments_are_in_flight_pay_once(tmp_path: Path) -> None:
    seed = time.time_ns() % 1_000_000
    row = await run_kill_at_effect(tmp_path, traces=4, rounds=3, kills=4, seed=seed)
    table = render_effects(row, f"kill-at-effect (seed {seed})")
    print(table)
    assert row.clean, table
    assert row.kills == 4 and row.in_flight_kills >= 3, table  # a charge, refund, payout, charge
    assert row.calls == 4 * 3 * 3, table
    assert row.resolutions["rerun"] >= 1, table  # charge: idempotent
    assert row.resolutions["reconciled_done"] + row.resolutions["reconciled_not_done"] >= 1, table
    assert row.resolutions["asked"] >= 1 and sum(row.decisions.values()) >= 1, table
