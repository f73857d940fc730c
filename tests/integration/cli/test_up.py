"""``longhaul up`` as a real process: free ports, a temp data dir, driven by ``longhaul run``,
then Ctrl-C (SIGINT) stops everything and leaves no process behind."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import httpx
import nats
import pytest
from longhaul.core.config import CONFIG_ERROR_EXIT

from tests.integration.cli.harness import LONGHAUL, alive, cli_env, longhaul

START_DEADLINE_S = 90.0
STOP_DEADLINE_S = 60.0


async def test_up_serves_run_and_sigint_stops_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    process = await asyncio.create_subprocess_exec(
        LONGHAUL,
        "up",
        "--port",
        "0",
        "--nats-port",
        "0",
        "--data-dir",
        str(data_dir),
        "--executors",
        "2",
        env=cli_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    stderr = asyncio.create_task(process.stderr.read())
    seen: list[str] = []
    pids: list[int] = []
    try:
        async with asyncio.timeout(START_DEADLINE_S):
            while not any("Ctrl-C stops all" in line for line in seen):
                line = (await process.stdout.readline()).decode()
                assert line, f"up exited early:\n{''.join(seen)}\n{(await stderr).decode()}"
                seen.append(line)
        banner = "".join(seen)
        assert "local development stack" in banner and "scripted:auto" in banner
        assert "local:smollm2" in banner
        match = re.search(r"gateway:\s+(http://[\d.]+:\d+)", banner)
        assert match, banner
        url = match.group(1)
        state = json.loads((data_dir / "up.json").read_text())
        assert state["gateway"] == url and state["pid"] == process.pid
        assert set(state["children"]) == {
            "gateway",
            "planner",
            "verifier",
            "executor-1",
            "executor-2",
        }
        pids = [state["nats_pid"], *state["children"].values()]
        assert all(alive(pid) for pid in pids)

        # The embedded server admits only the users `up` generated, one per service.
        with pytest.raises(nats.errors.Error, match=r"(?i)authorization"):
            await nats.connect(state["nats"], allow_reconnect=False, connect_timeout=10)
        credentials = json.loads(await asyncio.to_thread(Path(state["nats_credentials"]).read_text))
        admin = await nats.connect(
            state["nats"], user="admin", password=credentials["admin"], allow_reconnect=False
        )
        await admin.close()
        environ = Path(f"/proc/{state['children']['gateway']}/environ")
        gateway_env = await asyncio.to_thread(environ.read_bytes)
        assert b"LONGHAUL_NATS__USER=gateway\0" in gateway_env

        result = await longhaul("run", "hello", "--tool", "glob", url=url)
        assert result.code == 0, result.output
        assert "answer" in result.stdout and "completed ·" in result.stdout
        # an import is written under the import writer's user, which no service runs as: the
        # executor's own may not publish every trace event an imported log holds
        executor_env = Path(f"/proc/{state['children']['executor-1']}/environ")
        assert b"LONGHAUL_EXECUTOR__IMPORT_USER=importer\0" in await asyncio.to_thread(
            executor_env.read_bytes
        )
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            [trace] = (await http.get("/api/traces")).json()["traces"]
            path = f"/api/traces/{trace['trace_id']}"
            files = [("files", ("notes.txt", b"n", "text/plain"))]  # the gateway's file_uploaded
            assert (await http.post(f"{path}/files", files=files)).status_code == 202
            bundle = await http.get(f"{path}/export")
            imported = await http.post("/api/traces/import", content=bundle.content)
            assert imported.status_code == 201, imported.text
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
    async with asyncio.timeout(STOP_DEADLINE_S):
        rest = await process.stdout.read()
        code = await process.wait()
        await stderr
    assert code == 0
    assert "stopped." in rest.decode()
    assert [pid for pid in pids if alive(pid)] == []
    assert not (data_dir / "up.json").exists()
    assert (data_dir / "logs" / "gateway.log").stat().st_size > 0


BAD_CONFIG = "pipeline:\n  middleware:\n    - {name: AuditLog}\n"


async def refused(args: list[str], env: dict[str, str]) -> str:
    """Run ``args`` to its end; it must refuse its configuration. Its output."""
    process = await asyncio.create_subprocess_exec(
        *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(STOP_DEADLINE_S):
        stdout, stderr = await process.communicate()
    output = (stdout + stderr).decode()
    assert process.returncode == CONFIG_ERROR_EXIT, output
    return output


@pytest.mark.parametrize(
    "command",
    [
        [LONGHAUL, "up", "--port", "0", "--nats-port", "0"],
        *[
            [sys.executable, "-m", f"longhaul.{service}.main"]
            for service in ("executor", "gateway", "planner", "verifier")
        ],
    ],
    ids=["up", "executor", "gateway", "planner", "verifier"],
)
async def test_a_bad_config_stops_before_anything_starts(
    tmp_path: Path, command: list[str]
) -> None:
    config = tmp_path / "longhaul.yaml"
    config.write_text(BAD_CONFIG)
    data_dir = tmp_path / "data"
    args = [*command, "--data-dir", str(data_dir)] if command[1] == "up" else command
    env = cli_env(
        LONGHAUL_CONFIG=str(config),
        LONGHAUL_NATS__URL="nats://127.0.0.1:9",  # nothing there: it must not get that far
    )
    output = await refused(args, env)
    assert "pipeline.middleware" in output and "AuditLog" in output, output
    assert "Traceback" not in output, output
    if command[1] == "up":  # no embedded server, no service was started
        assert not (data_dir / "up.json").exists()
        assert not (data_dir / "jetstream").exists()


@pytest.mark.parametrize(
    "command",
    [
        [LONGHAUL, "up", "--port", "0", "--nats-port", "0"],
        [sys.executable, "-m", "longhaul.executor.main"],
    ],
    ids=["up", "executor"],
)
async def test_a_tool_module_that_cannot_be_imported_stops_at_start(
    tmp_path: Path, command: list[str]
) -> None:
    data_dir = tmp_path / "data"
    args = [*command, "--data-dir", str(data_dir)] if command[1] == "up" else command
    env = cli_env(
        LONGHAUL_EXECUTOR__TOOL_MODULES="no_such_tools_module",
        LONGHAUL_NATS__URL="nats://127.0.0.1:9",  # nothing there: it must not get that far
    )
    output = await refused(args, env)
    # One line names the module and the import error.
    [line] = [line for line in output.splitlines() if "no_such_tools_module" in line]
    assert "No module named 'no_such_tools_module'" in line, output
    assert "Traceback" not in output and "restarting" not in output, output
    if command[1] == "up":
        assert not (data_dir / "jetstream").exists()
