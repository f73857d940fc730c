"""``make deploy-test``: the shipped deployment, built and run as an operator runs it.

Builds the image from ``deploy/Dockerfile`` and starts ``docker-compose.yml`` (three NATS nodes,
the four services, two executors) with freshly generated NATS users and two API keys, plus
``tests/deploy/fixture`` mounted read-only (a scripted model, a per-key stdio MCP server, a
command check). Then, over the gateway's HTTP API:

1. a trace whose model calls ``bash``: the sandbox's output comes back;
2. a trace with a command verification check: the first answer fails it, the second passes;
3. the per-key MCP server under two keys: each sees its own directory only;
4. six traces running while one NATS node and one executor container are killed: all six
   finish, each turn and tool call recorded once;
5. an upgrade in place: three traces waiting for a person's approval, the services rebuilt and
   recreated (``up -d --build`` with a new revision), the three approved afterwards finish;
6. ``down -v``: no container, network or volume of the project is left.

Not part of ``make test``: it needs a container engine, and fails (exit 1, saying so) when
none answers; it never passes without one. Prints each phase's time (docs/10-operations.md,
"Deploying").
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("fixture")
PROJECT = "lhdeploytest"
MODEL = "scripted:deploy.yaml"
SLOW_MODEL = "scripted:deploy.yaml?latency_ms=1500"
SERVICES = ("gateway", "planner", "executor", "verifier")
READY_S = 300.0
TRACE_S = 180.0


class DeployTestFailed(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise DeployTestFailed(what)


def run(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 1800) -> str:
    done = subprocess.run(
        list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise DeployTestFailed(
            f"{' '.join(argv)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}"
        )
    return done.stdout


def engine_answers() -> str | None:
    """``None`` when docker and docker-compose both answer, else why not."""
    for argv in (
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        ["docker-compose", "version"],
    ):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{argv[0]}: {exc}"
        if done.returncode != 0:
            return f"{' '.join(argv)}: {(done.stderr or done.stdout).strip()[-500:]}"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def until(what: str, deadline_s: float, probe: Callable[[], Any]) -> Any:
    """``probe()`` until it returns something truthy (polling: the stack is in containers)."""
    deadline = time.monotonic() + deadline_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(1.0)
    raise DeployTestFailed(f"{what}: not within {deadline_s:.0f} s (last: {last!r})")


class Stack:
    """The compose project: its command line, environment and the gateway's HTTP client."""

    def __init__(self, override: Path, keys: tuple[str, str], port: int) -> None:
        self.files = ["-f", "docker-compose.yml", "-f", str(override)]
        self.env = {
            **os.environ,
            "LONGHAUL_API_KEYS": ",".join(keys),
            "LONGHAUL_GATEWAY_PORT": str(port),
            "LONGHAUL_REVISION": "first",
        }
        self.url = f"http://127.0.0.1:{port}"
        self.keys = keys

    def compose(self, *args: str, timeout: float = 1800) -> str:
        return run(
            ["docker-compose", "-p", PROJECT, *self.files, *args], env=self.env, timeout=timeout
        )

    def http(self, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "-q", service).split()

    def readiness(self) -> dict[str, Any]:
        response = httpx.get(f"{self.url}/readyz", timeout=5)
        body: dict[str, Any] = response.json()
        return body


def start_trace(http: httpx.Client, prompt: str, **fields: Any) -> str:
    body = {"messages": [{"role": "user", "content": prompt}], "model": MODEL, **fields}
    response = http.post("/api/traces", json=body)
    check(response.status_code in (200, 201, 202), f"POST /api/traces: {response.text}")
    trace_id: str = response.json()["trace_id"]
    return trace_id


def view(http: httpx.Client, trace_id: str) -> dict[str, Any]:
    response = http.get(f"/api/traces/{trace_id}")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def finished(http: httpx.Client, trace_id: str) -> dict[str, Any]:
    """The trace's view once it completed; a failed or cancelled one fails the run."""

    def ended() -> dict[str, Any] | None:
        state = view(http, trace_id)
        status = state.get("status")
        if status in ("failed", "cancelled", "stopped"):
            raise DeployTestFailed(f"trace {trace_id} ended {status}: {json.dumps(state)[:2000]}")
        return state if status == "completed" else None

    result: dict[str, Any] = until(f"trace {trace_id} completed", TRACE_S, ended)
    response = http.get(f"/api/traces/{trace_id}/messages")
    response.raise_for_status()
    result["messages"] = response.json()["messages"]
    return result


def all_ended(http: httpx.Client, traces: list[str]) -> bool | None:
    statuses = [view(http, t).get("status") for t in traces]
    if all(status in ("completed", "failed", "cancelled", "stopped") for status in statuses):
        return True
    print(f"  statuses: {sorted(map(str, statuses))}", flush=True)
    return None


def tool_outputs(state: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in state["messages"] if m.get("role") == "tool"]


def assistant_turns(state: dict[str, Any]) -> int:
    return sum(1 for m in state["messages"] if m.get("role") == "assistant")


# ---- the phases ----------------------------------------------------------------------------


def bash_comes_back(stack: Stack) -> None:
    with stack.http(stack.keys[0]) as http:
        state = finished(http, start_trace(http, "bash-in-the-sandbox"))
    [output] = tool_outputs(state)
    check("sandboxed-42" in output, f"bash output: {output!r}")
    # confined: the image's /app (its code, its virtualenv) is not in the sandbox
    check("No such file" in output, f"the sandbox sees /app: {output!r}")


def command_check_runs(stack: Stack) -> None:
    with stack.http(stack.keys[0]) as http:
        trace_id = start_trace(http, "verify-with-a-command", verification={"check": "says-right"})
        state = finished(http, trace_id)
    answers = [str(m.get("content")) for m in state["messages"] if m.get("role") == "assistant"]
    # "wrong" failed the check (re-injected), "right" passed it: the check ran, in the sandbox,
    # in the trace's directory (it needs proof.txt, written there by the first turn)
    check(answers[-2:] == ["wrong", "right"], f"answers: {answers}")


def mcp_per_key(stack: Stack) -> None:
    alice, bob = stack.keys
    with stack.http(alice) as http:
        mine = finished(http, start_trace(http, "mcp-write-mine"))
    with stack.http(bob) as http:
        theirs = finished(http, start_trace(http, "mcp-peek-at-others"))
    written, listed = tool_outputs(mine)
    check(
        "wrote mine.txt" in written and "mine.txt" in listed,
        f"alice's server: {written!r} {listed!r}",
    )
    own, keys = tool_outputs(theirs)
    check("mine.txt" not in own, f"bob's server lists alice's file: {own!r}")
    # /work/keys inside bob's sandbox holds bob's own directory and no other
    check(
        owner_id(alice) not in keys and owner_id(bob) in keys,
        f"bob sees under /work/keys: {keys!r}",
    )


def owner_id(key: str) -> str:
    """The id a key's traces and directories are filed under (the gateway's ``owner_id``)."""
    return "k_" + hashlib.sha256(key.encode()).hexdigest()[:16]


def kill_under_load(stack: Stack) -> None:
    """One NATS node and one executor killed while six traces run: all six complete, each
    turn and tool call recorded exactly once."""
    with stack.http(stack.keys[0]) as http:
        traces = [start_trace(http, f"slow-steps {n}", model=SLOW_MODEL) for n in range(6)]
        until(
            "the six traces running",
            60,
            lambda: all(view(http, t).get("status") == "running" for t in traces),
        )
        executor = stack.containers("executor")[0]
        nats = stack.containers("nats-2")[0]
        run(["docker", "kill", nats])
        run(["docker", "kill", executor])
        until("the six traces ended", TRACE_S, lambda: all_ended(http, traces))
        states = [finished(http, t) for t in traces]
    for trace_id, state in zip(traces, states, strict=True):
        outputs = tool_outputs(state)
        check(len(outputs) == 3, f"{trace_id}: {len(outputs)} tool results, not 3")
        check(assistant_turns(state) == 4, f"{trace_id}: {assistant_turns(state)} turns, not 4")
    # the killed ones come back (restart: unless-stopped); the cluster is whole again
    until("the killed containers restarted", READY_S, lambda: stack.readiness()["status"] == "ok")


def upgrade_in_place(stack: Stack) -> None:
    """Three traces waiting for a person; the services rebuilt and recreated; approved
    afterwards, the three finish."""
    with stack.http(stack.keys[1]) as http:
        traces = [
            start_trace(http, f"wait-for-a-person {n}", approval={"tools": ["bash"]})
            for n in range(3)
        ]
        pending = {t: waiting_calls(http, t) for t in traces}
    before = {s: stack.containers(s) for s in SERVICES}
    stack.env["LONGHAUL_REVISION"] = "second"
    stack.compose("up", "-d", "--build")
    until("ready after the upgrade", READY_S, lambda: stack.readiness()["status"] == "ok")
    after = {s: stack.containers(s) for s in SERVICES}
    for service in SERVICES:
        check(not set(before[service]) & set(after[service]), f"{service} was not recreated")
    for container in after["gateway"]:
        label = run(
            [
                "docker",
                "inspect",
                "-f",
                '{{index .Config.Labels "org.opencontainers.image.revision"}}',
                container,
            ]
        )
        check(label.strip() == "second", f"the gateway runs revision {label.strip()!r}")
    with stack.http(stack.keys[1]) as http:
        for trace_id, calls in pending.items():
            for call in calls:
                response = http.post(
                    f"/api/traces/{trace_id}/approve",
                    json={"tool_call_id": call["tool_call_id"], "approved": True},
                )
                check(response.status_code < 300, f"approve: {response.text}")
        for trace_id in traces:
            state = finished(http, trace_id)
            outputs = tool_outputs(state)
            check(len(outputs) == 1 and "approved-run" in outputs[0], f"{trace_id}: {outputs}")


def waiting_calls(http: httpx.Client, trace_id: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = until(
        f"{trace_id} waiting for approval",
        TRACE_S,
        lambda: view(http, trace_id).get("pending_approvals"),
    )
    return calls


def nothing_left(stack: Stack) -> None:
    stack.compose("down", "-v", "--remove-orphans")
    label = f"label=com.docker.compose.project={PROJECT}"
    for kind in ("container", "network", "volume"):
        argv = ["docker", kind, "ls", "-q", "--filter", label]
        if kind == "container":
            argv.insert(3, "-a")
        left = run(argv).split()
        check(not left, f"down -v left {kind}s: {left}")


# ---- set-up ----------------------------------------------------------------------------------


@contextmanager
def secrets_dir() -> Iterator[None]:
    """``deploy/secrets`` generated by ``longhaul nats-auth`` (an operator's own are used as
    they are, never overwritten); the ones generated here are removed afterwards."""
    target = ROOT / "deploy" / "secrets"
    made = not target.exists()
    if made:
        run([str(Path(sys.executable).with_name("longhaul")), "nats-auth", "--out", str(target)])
    try:
        yield
    finally:
        if made:
            shutil.rmtree(target, ignore_errors=True)


def override_file(tmp: Path) -> Path:
    """The fixture, readable by the image's user, mounted into every service."""
    fixture = tmp / "fixture"
    shutil.copytree(FIXTURE, fixture)
    shutil.copy(ROOT / "tests" / "support" / "mcp_server.py", fixture / "mcp_server.py")
    for path in (tmp, fixture, *fixture.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    service = {
        "environment": {"LONGHAUL_CONFIG": "/etc/longhaul-test/config.yaml"},
        "volumes": [f"{fixture}:/etc/longhaul-test:ro"],
    }
    override = tmp / "compose.override.yml"
    override.write_text(
        yaml.safe_dump({"version": "3.8", "services": dict.fromkeys(SERVICES, service)})
    )
    return override


def main() -> int:
    problem = engine_answers()
    if problem is not None:
        print(f"make deploy-test FAILED: no container engine answers ({problem}).", file=sys.stderr)
        print(
            "Start one (e.g. ../shared/tools/container-engine.sh) and run it again.",
            file=sys.stderr,
        )
        return 1
    timings: list[tuple[str, float]] = []

    def phase(name: str, step: Callable[[], Any]) -> None:
        started = time.monotonic()
        print(f"· {name} …", flush=True)
        step()
        timings.append((name, time.monotonic() - started))

    def up() -> None:
        stack.compose("up", "-d")
        until("/readyz ok", READY_S, lambda: stack.readiness()["status"] == "ok")

    keys = (f"lh-{secrets.token_hex(16)}", f"lh-{secrets.token_hex(16)}")
    with tempfile.TemporaryDirectory(prefix="lh-deploy-test-") as tmp, secrets_dir():
        stack = Stack(override_file(Path(tmp)), keys, free_port())
        try:
            phase("build the image", lambda: stack.compose("build"))
            phase("up -d until /readyz says ok", up)
            phase("bash trace, output back", lambda: bash_comes_back(stack))
            phase("command verification check", lambda: command_check_runs(stack))
            phase("stdio MCP server per key (two keys)", lambda: mcp_per_key(stack))
            # the upgrade before the kills: what it checks holds whatever they leave behind
            phase(
                "upgrade in place (up -d --build), 3 waiting traces",
                lambda: upgrade_in_place(stack),
            )
            phase("6 traces, one NATS node and one executor killed", lambda: kill_under_load(stack))
        except Exception:
            print(stack.compose("ps"), file=sys.stderr)
            print(stack.compose("logs", "--tail", "40"), file=sys.stderr)
            raise
        finally:
            phase("down -v, nothing left", lambda: nothing_left(stack))
    print("\nmake deploy-test passed:")
    for name, took in timings:
        print(f"  {name:<55} {took:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DeployTestFailed as exc:
        print(f"make deploy-test FAILED: {exc}", file=sys.stderr)
        sys.exit(1)
