"""``disk-full``: ``longhaul up`` with an event stream of a few MB, filled under load.

Traces of bulky recorded steps are started through the API in waves until the gateway answers
507; every answer must be a start or a 507 (a 5xx is noted). Every trace must then end
``completed`` or ``stopped`` with ``storage_full``, the stream must still start at sequence 1
(nothing dropped), and ``/readyz`` must say why. Then the operator raises the limit (the
stream's ``max_bytes``, as a restart with a larger ``store.max_bytes`` would): ``/readyz`` turns
ok and every stopped trace is continued through the API and must complete. The suite's usual
checks follow (nothing duplicated, unpaired or run twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
from longhaul.core.connection import connect
from longhaul.core.store import EventStore

from tests.chaos.suite import Row, _check, _wait_final
from tests.chaos.up import Up, admin_config
from tests.integration.executor.scripts import bulky_steps
from tests.support.env import SCRIPTED_DIR_VAR, service_env
from tests.support.folds import trace_state

SCENARIO = "disk-full"
TOOLS = "tests.integration.executor.tooling"
LIMIT = 3 * 1024 * 1024
HEADROOM = 0.25
WAVE = 3
MAX_STARTS = 200
PAD = 6_000


async def run_disk_full(root: Path, *, steps: int, hold_ms: int) -> Row:
    row = Row(SCENARIO)
    steps_log, verify_log = root / "steps.jsonl", root / "verify.log"
    steps_log.touch()
    verify_log.touch()  # nothing is verified here: the suite's check reads it all the same
    env = {
        **service_env(),
        SCRIPTED_DIR_VAR: str(root),
        "LONGHAUL_EXECUTOR__TOOL_MODULES": TOOLS,
        "LONGHAUL_STORE__MAX_BYTES": str(LIMIT),
        "LONGHAUL_STORE__HEADROOM": str(HEADROOM),
        "PYTHONUNBUFFERED": "1",
    }
    model = bulky_steps(root / "bulky.yaml", steps, steps_log, pad=PAD, hold_ms=hold_ms)
    up = Up(root, env)
    state = await up.start()
    conn = await connect(admin_config(state))
    store = EventStore(conn)
    started: list[str] = []
    try:
        async with httpx.AsyncClient(base_url=state["gateway"], timeout=30) as http:
            await _fill(http, model, started, row)
            await _wait_final(store, started, [])
            stopped = []
            for trace_id in started:
                trace = await trace_state(store, trace_id)
                if trace.status == "stopped" and trace.stop_reason == "storage_full":
                    stopped.append(trace_id)
                elif trace.status != "completed":
                    row.notes.append(f"{trace_id}: {trace.status} {trace.stop_reason or ''}")
            row.affected = len(stopped)
            info = await conn.js.stream_info(conn.names.stream)
            if info.state.first_seq != 1:
                row.lost += 1
                row.notes.append(f"the stream starts at {info.state.first_seq}: events dropped")
            ready = (await http.get("/readyz")).json()
            if ready.get("status") != "storage_full":
                row.notes.append(f"/readyz while full: {ready}")
            raised_at = time.time()
            config = info.config
            config.max_bytes = LIMIT * 4
            await conn.js.update_stream(config)
            await _until_ready(http)
            row.back_after_s = time.time() - raised_at
            for trace_id in stopped:
                again = await http.post(f"/api/traces/{trace_id}/run", json={})
                if again.status_code != 202:
                    row.notes.append(f"continue {trace_id}: {again.status_code} {again.text}")
            await _wait_final(store, started, [])
        await _check(row, store, started, [], steps_log, verify_log)
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
        await up.stop()
    return row


async def _fill(http: httpx.AsyncClient, model: str, started: list[str], row: Row) -> None:
    """Start waves of traces until the gateway answers 507."""
    body = {"messages": [{"role": "user", "content": "go"}], "model": model}
    while len(started) < MAX_STARTS:
        answers = await asyncio.gather(*(http.post("/api/traces", json=body) for _ in range(WAVE)))
        refused = False
        for answer in answers:
            if answer.status_code == 202:
                started.append(answer.json()["trace_id"])
            elif answer.status_code == 507:
                refused = True
            else:
                row.notes.append(f"start answered {answer.status_code}: {answer.text[:200]}")
                row.lost += 1
        if refused:
            return
        await asyncio.sleep(0.2)  # the next wave while these write
    row.notes.append(f"no 507 after {MAX_STARTS} starts")


async def _until_ready(http: httpx.AsyncClient, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:  # readiness is only observable by asking
        if (await http.get("/readyz")).json().get("status") == "ok":
            return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"/readyz not ok {within_s:.0f} s after the limit was raised")
