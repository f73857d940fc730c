"""The verifier service against a real nats-server: each method, idempotency, poison events."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
from longhaul.core.config import LonghaulConfig
from longhaul.core.connection import Connection
from longhaul.core.consumer import Delivery
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.config import ModelsConfig
from longhaul.domain.ids import new_id
from longhaul.verifier.handler import Verifier

from tests.integration.verifier.conftest import (
    Checks,
    unowned_home,
    verdict,
    verdicts,
    waiting_trace,
)
from tests.support import procs
from tests.support.env import service_env as base_service_env
from tests.support.folds import trace_state

Start = Callable[..., Awaitable[None]]
SCHEMA = {
    "type": "object",
    "required": ["title", "score"],
    "properties": {"title": {"type": "string"}, "score": {"type": "integer", "minimum": 0}},
}


def py(code: str) -> str:
    return f"python3 -c {shlex.quote(code)}"


async def test_json_schema_pass_and_fail(store: EventStore, run_verifier: Start) -> None:
    await run_verifier()
    good = await waiting_trace(
        store, '```json\n{"title": "x", "score": 3}\n```', {"json_schema": SCHEMA}
    )
    bad = await waiting_trace(store, '{"title": 5}', {"json_schema": SCHEMA})
    not_json = await waiting_trace(store, "no json here", {"json_schema": SCHEMA})
    assert isinstance(await verdict(store, good), ev.VerificationPassed)
    failed = await verdict(store, bad)
    assert isinstance(failed, ev.VerificationFailed)
    assert any("'score' is a required property" in e for e in failed.errors)
    assert any("title: 5 is not of type 'string'" in e for e in failed.errors)
    garbage = await verdict(store, not_json)
    assert isinstance(garbage, ev.VerificationFailed)
    assert "not JSON" in garbage.errors[0]
    state = await trace_state(store, good)
    assert state.status == "running" and state.verification.passed


async def test_command_runs_in_working_dir_with_answer_on_stdin(
    store: EventStore, run_verifier: Start, verifier_config: LonghaulConfig, checks: Checks
) -> None:
    """An ownerless trace's check runs where the executor ran its agent: ``unowned/<scope>``
    below the working root, not the root nor the verifier's own directory."""
    ok, wrong = new_id("t"), new_id("t")
    for trace_id in (ok, wrong):
        (unowned_home(verifier_config, trace_id) / "expected.txt").write_text("42")
    check = py(
        "import os, sys; got = sys.stdin.read(); want = open('expected.txt').read(); "
        "print('got', got, 'in', os.getcwd()); sys.exit(0 if got == want else 3)"
    )
    await run_verifier()
    await waiting_trace(store, "42", checks(check), trace_id=ok)
    await waiting_trace(store, "41", checks(check), trace_id=wrong)
    passed = await verdict(store, ok)
    assert isinstance(passed, ev.VerificationPassed)
    assert "got 42" in passed.log and "[exit code 0]" in passed.log
    assert f"in {unowned_home(verifier_config, ok)}" in passed.log
    failed = await verdict(store, wrong)
    assert isinstance(failed, ev.VerificationFailed)
    assert failed.errors == ["command: command exited with code 3"]
    assert "got 41" in failed.log


async def exits_within(pid: int, seconds: float) -> bool:
    """Wait for process ``pid`` (not our child) to end, via a pidfd that turns readable."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    loop.add_reader(fd, ended.set)
    try:
        await asyncio.wait_for(ended.wait(), seconds)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def test_command_timeout_kills_the_process_group(
    store: EventStore, run_verifier: Start, tmp_path: Path, checks: Checks
) -> None:
    sleeper = procs.marker()
    # The shell starts a grandchild; a timeout must kill it too, not only the shell.
    await run_verifier()
    trace_id = await waiting_trace(
        store,
        "x",
        checks(f"{shlex.join(sleeper)} & wait", timeout_s=4),
    )
    (pid,) = await procs.wait_for_host_pids(sleeper, 1)
    failed = await verdict(store, trace_id)
    assert isinstance(failed, ev.VerificationFailed)
    assert failed.errors == ["command: command timed out after 4s"]
    assert await exits_within(pid, 5)


async def test_command_output_is_capped_keeping_head_and_tail(
    store: EventStore, run_verifier: Start, checks: Checks
) -> None:
    command = py("print('HEAD'); print('x' * 200000); print('TAIL')")
    await run_verifier()
    trace_id = await waiting_trace(store, "", checks(command, output_cap=1000))
    passed = await verdict(store, trace_id)
    assert isinstance(passed, ev.VerificationPassed)
    assert "HEAD" in passed.log and "TAIL" in passed.log and "bytes omitted" in passed.log
    assert len(passed.log) < 1500


async def test_an_ownerless_trace_naming_another_directory_is_refused(
    store: EventStore, run_verifier: Start, checks: Checks
) -> None:
    """As the executor refuses it: its directory is ``unowned/<scope>``, nothing else."""
    await run_verifier()
    trace_id = await waiting_trace(store, "x", checks("true"), working_dir="/nonexistent/dir")
    failed = await verdict(store, trace_id)
    assert isinstance(failed, ev.VerificationFailed)
    assert "outside this trace's working directory" in failed.errors[0], failed.errors


def judge_script(tmp_path: Path, scores: list[int], verdict_: str) -> str:
    answer = {
        "criteria": [
            {"criterion": f"c{n}", "score": s, "reason": f"reason {n}"}
            for n, s in enumerate(scores, 1)
        ],
        "verdict": verdict_,
        "feedback": "cite sources",
    }
    path = tmp_path / f"judge-{'-'.join(map(str, scores))}.yaml"
    path.write_text(json.dumps([{"content": json.dumps(answer)}]))
    return f"scripted:{path}"


async def test_llm_judge_scores_each_criterion(
    store: EventStore, run_verifier: Start, verifier_config: LonghaulConfig, tmp_path: Path
) -> None:
    strict = judge_script(tmp_path, [9, 4], "pass")
    config = verifier_config.model_copy(
        update={"models": ModelsConfig(default="scripted:auto", roles={"verifier": strict})}
    )
    await run_verifier(config)
    criteria = ["mentions the capital", "cites a source"]
    low = await waiting_trace(store, "Paris.", {"criteria": criteria})
    lenient = judge_script(tmp_path, [8, 9], "pass")
    high = await waiting_trace(
        store, "Paris [1].", {"judge": {"criteria": criteria, "model": lenient}}
    )
    failed = await verdict(store, low)
    assert isinstance(failed, ev.VerificationFailed)
    assert failed.errors == ["judge: cites a source (score 4): reason 2"]
    assert "[9/10] mentions the capital" in failed.log
    passed = await verdict(store, high)
    assert isinstance(passed, ev.VerificationPassed)
    assert "verdict: pass" in passed.log


async def test_offline_judge_is_skipped_not_invented(
    store: EventStore, run_verifier: Start
) -> None:
    await run_verifier()
    trace_id = await waiting_trace(store, "anything", {"criteria": ["is correct"]})
    passed = await verdict(store, trace_id)
    assert isinstance(passed, ev.VerificationPassed)
    assert "skipped" in passed.log and "offline" in passed.log


async def test_all_configured_checks_must_pass(
    store: EventStore, run_verifier: Start, checks: Checks
) -> None:
    await run_verifier()
    trace_id = await waiting_trace(
        store, '{"title": "t", "score": 1}', {"json_schema": SCHEMA, **checks("exit 1")}
    )
    failed = await verdict(store, trace_id)
    assert isinstance(failed, ev.VerificationFailed)
    assert failed.errors == ["command: command exited with code 1"]
    assert "== json_schema: passed" in failed.log and "== command: failed" in failed.log


async def test_request_method_overrides_trace_config(
    store: EventStore, run_verifier: Start, checks: Checks
) -> None:
    await run_verifier()
    trace_id = await waiting_trace(store, "x", checks("exit 1"), method=checks("true"))
    assert isinstance(await verdict(store, trace_id), ev.VerificationPassed)


async def test_a_raw_command_on_the_log_is_refused_and_never_runs(
    store: EventStore, run_verifier: Start, tmp_path: Path
) -> None:
    """A client's command that reached the log anyway (a forged or old event) fails
    verification saying why, and nothing runs: commands are the operator's."""
    await run_verifier()
    planted = tmp_path / "ran"
    raw = await waiting_trace(store, "x", {"command": f"touch {planted}", "cwd": "/"})
    failed = await verdict(store, raw)
    assert isinstance(failed, ev.VerificationFailed)
    assert "verification.command: commands are the operator's" in failed.errors[0]
    assert "verification.cwd" in failed.errors[0]
    assert not planted.exists()
    in_request = await waiting_trace(store, "x", None, method={"command": f"touch {planted}"})
    assert isinstance(await verdict(store, in_request), ev.VerificationFailed)
    assert not planted.exists()


async def test_an_unknown_check_fails_verification_naming_the_known_ones(
    store: EventStore, run_verifier: Start, checks: Checks
) -> None:
    checks("true")
    await run_verifier()
    trace_id = await waiting_trace(store, "x", {"check": "nope"})
    failed = await verdict(store, trace_id)
    assert isinstance(failed, ev.VerificationFailed)
    assert failed.errors == [
        "invalid verification config: verification.check: no check named 'nope' (known: check1)"
    ]


async def test_invalid_config_fails_verification(store: EventStore, run_verifier: Start) -> None:
    await run_verifier()
    trace_id = await waiting_trace(store, "x", {"json_schema": 7})
    failed = await verdict(store, trace_id)
    assert isinstance(failed, ev.VerificationFailed)
    assert failed.errors[0].startswith("invalid verification config: json_schema")


async def delivery_of(store: EventStore, trace_id: str) -> Delivery:
    async for recorded in store.replay("trace", trace_id):
        if isinstance(recorded.event, ev.VerificationRequested):
            return Delivery(
                "trace",
                trace_id,
                "verification_requested",
                recorded.seq,
                1,
                ev.encode(recorded.event),
            )
    raise AssertionError("no request")


async def test_redelivered_request_is_answered_once(
    store: EventStore, make_verifier: Callable[..., Verifier], checks: Checks
) -> None:
    trace_id = await waiting_trace(store, "x", checks("true"))
    delivery = await delivery_of(store, trace_id)
    first, second = make_verifier(), make_verifier()
    # Two replicas racing on the same delivery, then a late redelivery.
    await asyncio.gather(first.handle(delivery), second.handle(delivery))
    await first.handle(delivery)
    assert [type(e) for e in await verdicts(store, trace_id)] == [ev.VerificationPassed]


async def test_racing_replicas_run_the_command_once(
    store: EventStore,
    make_verifier: Callable[..., Verifier],
    verifier_config: LonghaulConfig,
    checks: Checks,
) -> None:
    trace_id = new_id("t")
    runs = unowned_home(verifier_config, trace_id) / "runs"
    command = ["sh", "-c", "echo run >> runs; sleep 0.5; cat >/dev/null"]
    await waiting_trace(store, "x", checks(command), trace_id=trace_id)
    delivery = await delivery_of(store, trace_id)
    first, second = make_verifier(), make_verifier()
    # The second finds the first's claim by the request's key and takes its verdict.
    await asyncio.gather(first.handle(delivery), second.handle(delivery))
    assert [type(e) for e in await verdicts(store, trace_id)] == [ev.VerificationPassed]
    assert runs.read_text().split() == ["run"]


async def test_superseded_request_gets_no_answer(
    store: EventStore, make_verifier: Callable[..., Verifier], checks: Checks
) -> None:
    trace_id = await waiting_trace(store, "x", checks("true"))
    stale = await delivery_of(store, trace_id)
    state = await trace_state(store, trace_id)
    # The user stops the trace and reruns it; it asks again for attempt 1 on a new answer.
    await store.append(
        "trace",
        trace_id,
        [
            ev.Stopped(reason="user"),
            ev.RunRequested(messages=[ev.InputMessage(role="user", content="again")]),
            ev.MessageAppended(sequence=4, parent_sequence=3, role="assistant", content="y"),
            ev.VerificationRequested(attempt=1, answer_sequence=4),
        ],
        expected=Position(state.stream_seq, state.version),
    )
    await make_verifier().handle(stale)
    assert await verdicts(store, trace_id) == []


async def test_poison_event_does_not_stop_the_service(
    store: EventStore, conn: Connection, run_verifier: Start, checks: Checks
) -> None:
    await run_verifier()
    subject = conn.names.subject("trace", "t_poison", "verification_requested")
    await conn.js.publish(subject, b"{not json")
    wrong_type = msgspec.json.encode({"type": "nope"})
    await conn.js.publish(
        conn.names.subject("trace", "t_poison2", "verification_requested"), wrong_type
    )
    trace_id = await waiting_trace(store, "x", checks("true"))
    assert isinstance(await verdict(store, trace_id), ev.VerificationPassed)


async def test_replicas_share_the_work_and_answer_each_request_once(
    store: EventStore, run_verifier: Start, checks: Checks
) -> None:
    await run_verifier()
    await run_verifier()
    traces = [await waiting_trace(store, str(n), checks("true")) for n in range(12)]
    for trace_id in traces:
        assert isinstance(await verdict(store, trace_id), ev.VerificationPassed)
    for trace_id in traces:
        assert len(await verdicts(store, trace_id)) == 1


async def test_service_main_runs_as_a_process(
    store: EventStore, verifier_config: LonghaulConfig, tmp_path: Path
) -> None:
    env = base_service_env()
    env.update(
        {
            "LONGHAUL_NATS__URL": verifier_config.nats.url,
            "LONGHAUL_NATS__NAMESPACE": verifier_config.nats.namespace,
            "LONGHAUL_MODELS__DEFAULT": "scripted:auto",
            "LONGHAUL_WORKING_ROOT": str(tmp_path / "work"),
            "LONGHAUL_VERIFIER__COMMANDS": json.dumps(
                {"answer_is_two": {"command": py("import json, sys; json.load(sys.stdin)")}}
            ),
            "LONGHAUL_SANDBOX__MODE": os.environ.get("LONGHAUL_SANDBOX__MODE", "auto"),
        }
    )
    log = os.open(tmp_path / "verifier.log", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "longhaul.verifier.main",
            env=env,
            stdout=log,
            stderr=log,
        )
    finally:
        os.close(log)
    try:
        trace_id = await waiting_trace(
            store,
            '{"title": "t", "score": 2}',
            {"json_schema": SCHEMA, "check": "answer_is_two"},
        )
        passed = await verdict(store, trace_id)
        assert isinstance(passed, ev.VerificationPassed)
        assert "== command: passed" in passed.log
    finally:
        process.terminate()
        code = await asyncio.wait_for(process.wait(), timeout=20)
    assert code == 0, (tmp_path / "verifier.log").read_text()


async def test_command_runs_in_its_key_s_directory_and_cannot_reach_another_key_s(
    store: EventStore,
    make_verifier: Callable[..., Verifier],
    verifier_config: LonghaulConfig,
    tmp_path: Path,
    checks: Checks,
) -> None:
    work = tmp_path / "work"
    theirs = work / "keys" / "k_bbbb" / "t_theirs"
    theirs.mkdir(parents=True)
    (theirs / "secret.txt").write_text("B-SECRET")
    verifier = make_verifier(verifier_config.model_copy(update={"working_root": work}))
    snoop = f"pwd; cat ../../k_bbbb/t_theirs/secret.txt {theirs}/secret.txt; ls {work}; true"
    trace_id = await waiting_trace(store, "x", checks(snoop), owner="k_aaaa")
    await verifier.handle(await delivery_of(store, trace_id))
    passed = await verdict(store, trace_id)
    assert isinstance(passed, ev.VerificationPassed)
    assert str(work / "keys" / "k_aaaa" / trace_id) in passed.log
    assert "B-SECRET" not in passed.log
    # Naming the other key's directory as the working directory is refused outright.
    named = await waiting_trace(
        store, "x", checks("cat secret.txt"), owner="k_aaaa", working_dir=str(theirs)
    )
    await verifier.handle(await delivery_of(store, named))
    refused = await verdict(store, named)
    assert isinstance(refused, ev.VerificationFailed)
    assert "outside this trace's working directory" in refused.errors[0]
    assert "B-SECRET" not in refused.log

    # Nor as the command's cwd, even the operator's (only the trace's own directory is ever
    # bound into the sandbox).
    for cwd in (str(theirs), "../../k_bbbb/t_theirs", "/"):
        escaping = await waiting_trace(
            store, "x", checks("cat secret.txt", cwd=cwd), owner="k_aaaa"
        )
        await verifier.handle(await delivery_of(store, escaping))
        refused = await verdict(store, escaping)
        assert isinstance(refused, ev.VerificationFailed)
        assert "outside the trace's working directory" in refused.errors[0], refused.errors
