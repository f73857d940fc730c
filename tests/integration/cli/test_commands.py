"""``longhaul run`` / ``traces …`` / ``replay`` against a live gateway and executor."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
import typer
from longhaul.cli.main import app
from longhaul.core.config import NatsConfig
from longhaul.domain.settings import SETTINGS
from longhaul.gateway.schemas.runs import RUN_SETTINGS

from tests.integration.cli.harness import cli_env, longhaul
from tests.integration.gateway.harness import RunningGateway, gateway_config, serve_gateway

TRACE_ID = re.compile(r"\b(t_[0-9A-Z]{26})\b")


def trace_id_in(text: str) -> str:
    match = TRACE_ID.search(text)
    assert match, text
    return match.group(1)


async def test_run_streams_progress_and_prints_the_answer(stack: RunningGateway) -> None:
    result = await longhaul("run", "list my files", "--tool", "glob", url=stack.url)
    assert result.code == 0, result.output
    trace_id = trace_id_in(result.stdout)
    assert "assistant → glob(" in result.stdout
    assert "tool glob:" in result.stdout
    assert "answer" in result.stdout and "completed ·" in result.stdout
    assert "scripted:auto" in result.stderr and "LONGHAUL_MODEL" in result.stderr
    async with stack.client() as http:
        trace = (await http.get(f"/api/traces/{trace_id}")).json()
    assert trace["status"] == "completed"


async def test_inspection_commands(stack: RunningGateway) -> None:
    run = await longhaul("run", "q", "--tool", "glob", "--name", "inspect-me", url=stack.url)
    trace_id = trace_id_in(run.stdout)
    listed = await longhaul("traces", "ls", url=stack.url)
    assert listed.code == 0 and trace_id in listed.stdout and "inspect-me" in listed.stdout
    only_failed = await longhaul("traces", "ls", "--status", "failed", url=stack.url)
    assert trace_id not in only_failed.stdout
    shown = await longhaul("traces", "show", trace_id, url=stack.url)
    assert shown.code == 0 and "completed" in shown.stdout and "inspect-me" in shown.stdout
    messages = await longhaul("traces", "messages", trace_id, url=stack.url)
    assert messages.code == 0
    assert messages.stdout.index("#1 user") < messages.stdout.index("#2 assistant")
    assert "→ glob(" in messages.stdout
    replay = await longhaul("replay", trace_id, url=stack.url)
    assert replay.code == 0
    lines = [line for line in replay.stdout.splitlines() if line.strip()]
    assert "created: q" in lines[0] and "completed" in lines[-1]
    event_ids = [int(line.split()[0]) for line in lines]
    assert event_ids == sorted(event_ids)
    watched = await longhaul("traces", "watch", trace_id, url=stack.url)
    assert watched.code == 0 and "answer" in watched.stdout


async def test_rewind_follow_and_no_follow(stack: RunningGateway) -> None:
    detached = await longhaul("run", "first", "--tool", "glob", "--no-follow", url=stack.url)
    assert detached.code == 0 and "traces watch" in detached.stdout
    trace_id = trace_id_in(detached.stdout)
    watched = await longhaul("traces", "watch", trace_id, url=stack.url)
    assert watched.code == 0
    rewound = await longhaul(
        "traces", "rewind", trace_id, "1", "-m", "second", "--follow", url=stack.url
    )
    assert rewound.code == 0, rewound.output
    assert "rewind after #1: second" in rewound.stdout and "answer" in rewound.stdout
    async with stack.client() as http:
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert [m["content"] for m in path[:2]] == ["first", "second"]
    forked = await longhaul(
        "traces", "rewind", trace_id, "1", "-m", "third", "--model", "scripted:auto?chunk=2",
        "--follow", url=stack.url,
    )  # fmt: skip
    assert forked.code == 0, forked.output
    async with stack.client() as http:
        path = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
    assert path[1]["content"] == "third"
    assert {m["model"] for m in path if m["role"] == "assistant"} == {"scripted:auto?chunk=2"}


async def test_reply_and_stop(stack: RunningGateway) -> None:
    asked = await longhaul("run", "ask me", "--tool", "ask_human", url=stack.url)
    assert asked.code == 0 and "the agent asks" in asked.stdout
    trace_id = trace_id_in(asked.stdout)
    replied = await longhaul("traces", "reply", trace_id, "blue", "--follow", url=stack.url)
    assert replied.code == 0, replied.output
    assert "human replied: blue" in replied.stdout and "answer" in replied.stdout
    waiting = trace_id_in(
        (await longhaul("run", "ask again", "--tool", "ask_human", url=stack.url)).stdout
    )
    stopped = await longhaul("traces", "stop", waiting, "--follow", url=stack.url)
    assert stopped.code == 1 and "stopped" in stopped.stdout
    refused = await longhaul("traces", "reply", waiting, "late", url=stack.url)
    assert refused.code == 1 and "409 conflict" in refused.stderr
    resumed = await longhaul("traces", "resume", waiting, url=stack.url)
    assert resumed.code == 0 and "accepted" in resumed.stdout


async def test_delete_a_waiting_trace(stack: RunningGateway) -> None:
    """The trace waits for a person: the delete stops it first, then it is unknown."""
    waiting = trace_id_in(
        (await longhaul("run", "ask me", "--tool", "ask_human", url=stack.url)).stdout
    )
    deleted = await longhaul("traces", "delete", waiting, "--yes", url=stack.url)
    assert deleted.code == 0, deleted.output
    assert "deleted 1 aggregate(s)" in deleted.stdout
    gone = await longhaul("traces", "show", waiting, url=stack.url)
    assert gone.code == 1 and "404 not_found" in gone.stderr


async def test_a_task_still_planning_is_not_deleted(stack: RunningGateway) -> None:
    async with stack.client() as http:
        task = (await http.post("/api/tasks", json={"goal": "plan it"})).json()["task_id"]
    refused = await longhaul("tasks", "delete", task, "--yes", url=stack.url)
    assert refused.code == 1 and "409 conflict" in refused.stderr and "planning" in refused.stderr
    async with stack.client() as http:
        assert (await http.get(f"/api/tasks/{task}")).status_code == 200


async def test_keys_erase_reports_what_it_removed(stack: RunningGateway) -> None:
    """A key with nothing stored (the stack's own key keeps its traces for the other tests;
    what erasing one removes is tested in tests/integration/gateway/test_delete.py)."""
    erased = await longhaul("keys", "erase", "k_00000000deadbeef", "--yes", url=stack.url)
    assert erased.code == 0, erased.output
    assert "deleted 0 aggregate(s): 0 events" in erased.stdout


async def test_clear_errors(stack: RunningGateway) -> None:
    unknown = await longhaul("traces", "show", "t_nope", url=stack.url)
    assert unknown.code == 1 and "404 not_found" in unknown.stderr
    port = httpx.URL(stack.url).port
    down = await longhaul("traces", "ls", url=f"http://127.0.0.1:{(port or 1) + 1}")
    assert down.code == 2
    assert "cannot reach the gateway" in down.stderr and "longhaul up" in down.stderr


@pytest.mark.parametrize("with_key", [False, True])
async def test_api_key_from_environment(nats_config: NatsConfig, with_key: bool) -> None:
    config = gateway_config(nats_config, api_keys="cli-secret")
    async with serve_gateway(config) as gateway:
        env = cli_env(LONGHAUL_API_KEY="cli-secret") if with_key else cli_env()
        result = await longhaul("traces", "ls", url=gateway.url, env=env)
    if with_key:
        assert result.code == 0, result.output
    else:
        assert result.code == 1 and "401" in result.stderr and "LONGHAUL_API_KEY" in result.stderr


async def test_replay_names_a_delegate_sub_trace_mode(stack: RunningGateway) -> None:
    result = await longhaul("run", "survey", "--model", "scripted:demo?latency_ms=0", url=stack.url)
    assert result.code == 0, result.output
    trace_id = trace_id_in(result.stdout)
    replay = await longhaul("replay", trace_id, url=stack.url)
    assert replay.code == 0, replay.output
    spawned = [line for line in replay.stdout.splitlines() if "sub-trace" in line]
    assert spawned, replay.stdout
    assert "(None)" not in replay.stdout and "None" not in "".join(spawned), replay.stdout
    assert any("(delegate" in line for line in spawned), replay.stdout


async def test_experiences_ls_show_export_import(stack: RunningGateway, tmp_path: Path) -> None:
    async with stack.client() as http:
        made = await http.post(
            "/api/experiences",
            json={
                "category": "environment",
                "content": "The CI box has no network.",
                "tags": {"intent": ["build"]},
            },
        )
    item = made.json()
    listed = await longhaul("experiences", "ls", "--tag", "build", url=stack.url)
    assert listed.code == 0 and item["id"] in listed.stdout and "environment" in listed.stdout
    shown = await longhaul("experiences", "show", item["id"], url=stack.url)
    assert shown.code == 0 and "The CI box has no network." in shown.stdout
    missing = await longhaul("experiences", "show", "ex_nothere", url=stack.url)
    assert missing.code == 1 and "404" in missing.stderr
    file = tmp_path / "experiences.md"
    exported = await longhaul("experiences", "export", "-o", str(file), url=stack.url)
    assert exported.code == 0 and f"id: {item['id']}" in file.read_text()
    file.write_text(file.read_text().replace("no network", "no network at all"))
    imported = await longhaul("experiences", "import", str(file), url=stack.url)
    assert imported.code == 0 and item["id"] in imported.stdout
    shown = await longhaul("experiences", "show", item["id"], url=stack.url)
    assert "no network at all" in shown.stdout
    to_stdout = await longhaul("experiences", "export", url=stack.url)
    assert to_stdout.stdout == file.read_text()


async def test_schedules_create_run_and_show(stack: RunningGateway) -> None:
    created = await longhaul(
        "schedules", "create", "nightly", "--prompt", "tidy up", "--every", "3600", "--paused",
        url=stack.url,
    )  # fmt: skip
    assert created.code == 0, created.output
    schedule_id = created.stdout.split()[0]
    assert schedule_id.startswith("sched_")
    ran = await longhaul("schedules", "run", schedule_id, url=stack.url)
    assert ran.code == 0, ran.output
    run_id = ran.stdout.strip()
    shown = await longhaul("schedules", "show", schedule_id, url=stack.url)
    assert shown.code == 0, shown.output
    assert "nightly" in shown.stdout and "every 3600s" in shown.stdout and "paused" in shown.stdout
    assert run_id in shown.stdout and "(run now)" in shown.stdout
    async with stack.client() as http:
        assert (await http.get(f"/api/traces/{run_id}")).json()["schedule_id"] == schedule_id
        assert (await http.delete(f"/api/schedules/{schedule_id}")).status_code == 200


async def test_run_sends_the_budget_flags(stack: RunningGateway) -> None:
    """``--max-tokens`` / ``--max-cost`` reach the trace as its budget."""
    result = await longhaul(
        "run", "q", "--mode", "trace", "--tool", "glob", "--max-tokens", "90000",
        "--max-cost", "2.5", "--no-follow", url=stack.url,
    )  # fmt: skip
    assert result.code == 0, result.output
    async with stack.client() as http:
        trace = (await http.get(f"/api/traces/{trace_id_in(result.stdout)}")).json()
    assert (trace["budget"]["max_tokens"], trace["budget"]["max_cost"]) == (90000, 2.5)


async def test_run_refuses_a_setting_out_of_its_bounds(stack: RunningGateway) -> None:
    """The flag's bounds are the domain's: refused before any request."""
    result = await longhaul("run", "q", "--max-iterations", "0", url=stack.url)
    output = " ".join(result.output.replace("│", " ").split())
    assert result.code == 2 and "'--max-iterations': Input should be greater than" in output


def test_runs_setting_flags_are_the_runs_settings() -> None:
    """Every setting ``POST /api/runs`` takes is a ``longhaul run`` flag, with its bounds."""
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    params = {p.name: p for p in command.commands["run"].params}
    flags = {"tools" if name == "tool" else name for name in params} & SETTINGS
    assert flags == set(RUN_SETTINGS)
    max_iterations = params["max_iterations"]
    assert isinstance(max_iterations, typer.core.TyperOption)
    assert (max_iterations.min, max_iterations.max) == (1, 100_000)
