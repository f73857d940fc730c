"""The list and show commands as Temporal's CLI users expect them: ``-o table|json|jsonl``,
``--limit``/``--status``/``--since``, roots only unless ``--all``, newest first, and tables
that never cut an id at 80 columns."""

from __future__ import annotations

import json

from tests.integration.cli.harness import cli_env, longhaul
from tests.integration.cli.test_commands import trace_id_in
from tests.integration.gateway.harness import RunningGateway

NARROW = cli_env(COLUMNS="80")
LONG_NAME = "a rather long name for a trace, much longer than an eighty column terminal allows"


async def test_traces_ls_roots_newest_first_filters_and_json(stack: RunningGateway) -> None:
    demo = await longhaul(
        "run", "check my files", "--model", "scripted:demo?latency_ms=0", "--name", LONG_NAME,
        url=stack.url,
    )  # fmt: skip
    assert demo.code == 0, demo.output
    root = trace_id_in(demo.stdout)
    later = trace_id_in((await longhaul("run", "q", "--tool", "glob", url=stack.url)).stdout)
    async with stack.client() as http:
        child = (await http.get(f"/api/traces/{root}")).json()["sub_traces"][0]["trace_id"]

    table = await longhaul("traces", "ls", url=stack.url, env=NARROW)
    assert table.code == 0, table.output
    assert root in table.stdout and later in table.stdout  # whole, at 80 columns
    assert child not in table.stdout  # roots only
    assert table.stdout.index(later) < table.stdout.index(root)  # newest first
    assert max(len(line) for line in table.stdout.splitlines()) <= 80

    every = await longhaul("traces", "ls", "--all", "-o", "json", url=stack.url)
    listed = json.loads(every.stdout)
    assert {root, child, later} <= {t["trace_id"] for t in listed}
    started = [t["created_at"] for t in listed]
    assert started == sorted(started, reverse=True)

    lines = await longhaul("traces", "ls", "-o", "jsonl", "--limit", "1", url=stack.url)
    [only] = [json.loads(line) for line in lines.stdout.splitlines()]
    assert only["trace_id"] == later

    failed = await longhaul("traces", "ls", "--status", "failed", "-o", "json", url=stack.url)
    assert json.loads(failed.stdout) == []
    future = await longhaul("traces", "ls", "--since", "2999-01-01", "-o", "json", url=stack.url)
    assert json.loads(future.stdout) == []
    recent = await longhaul("traces", "ls", "--since", "1h", "-o", "json", url=stack.url)
    assert {root, later} <= {t["trace_id"] for t in json.loads(recent.stdout)}
    wrong = await longhaul("traces", "ls", "--since", "yesterday-ish", url=stack.url)
    assert wrong.code == 2 and "--since" in wrong.stderr

    shown = await longhaul("traces", "show", root, url=stack.url, env=NARROW)
    assert "[x] Survey the working directory" in shown.stdout  # a done goal is marked
    as_json = await longhaul("traces", "show", root, "-o", "json", url=stack.url)
    assert json.loads(as_json.stdout)["trace_id"] == root
    said = await longhaul("traces", "messages", root, "-o", "jsonl", url=stack.url)
    records = [json.loads(line) for line in said.stdout.splitlines()]
    assert records[0]["role"] == "user" and records[0]["content"] == "check my files"


async def test_tasks_schedules_triggers_inbox_keep_ids_whole(stack: RunningGateway) -> None:
    async with stack.client() as http:
        task_id = (await http.post("/api/tasks", json={"goal": LONG_NAME})).json()["task_id"]
    tasks = await longhaul("tasks", "ls", url=stack.url, env=NARROW)
    assert tasks.code == 0, tasks.output
    assert task_id in tasks.stdout
    as_json = await longhaul("tasks", "ls", "-o", "json", "--status", "planning", url=stack.url)
    assert [t["task_id"] for t in json.loads(as_json.stdout)] == [task_id]
    done = await longhaul("tasks", "ls", "-o", "json", "--status", "completed", url=stack.url)
    assert json.loads(done.stdout) == []

    created = await longhaul(
        "schedules", "create", LONG_NAME, "--prompt", "tidy up", "--every", "3600", "--paused",
        url=stack.url,
    )  # fmt: skip
    schedule_id = created.stdout.split()[0]
    schedules = await longhaul("schedules", "ls", url=stack.url, env=NARROW)
    assert schedule_id in schedules.stdout
    listed = json.loads((await longhaul("schedules", "ls", "-o", "json", url=stack.url)).stdout)
    assert [s["schedule_id"] for s in listed] == [schedule_id]

    made = await longhaul(
        "triggers", "create", "issues", "--prompt", "Triage {{payload.title}}", "-o", "json",
        url=stack.url,
    )  # fmt: skip
    assert made.code == 0, made.output
    trigger = json.loads(made.stdout)
    assert trigger["secret"]
    triggers = await longhaul("triggers", "ls", url=stack.url, env=NARROW)
    assert trigger["trigger_id"] in triggers.stdout and trigger["secret"] not in triggers.stdout
    gone = await longhaul("triggers", "delete", trigger["trigger_id"], url=stack.url)
    assert gone.code == 0, gone.output
    after = json.loads((await longhaul("triggers", "ls", "-o", "json", url=stack.url)).stdout)
    assert after == []

    inbox = await longhaul("inbox", "ls", "-o", "json", url=stack.url)
    assert inbox.code == 0 and json.loads(inbox.stdout) == []


async def test_global_options_work_after_the_command(stack: RunningGateway) -> None:
    # the harness puts a --url first; the one after the command is the one used
    result = await longhaul("traces", "ls", "--url", stack.url, url="http://127.0.0.1:9")
    assert result.code == 0, result.output
    refused = await longhaul("traces", "ls", "--url=http://127.0.0.1:9", url=stack.url)
    assert refused.code == 2, refused.output
