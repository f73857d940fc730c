"""``longhaul eval`` end to end: a real ``longhaul up``, the real command as a subprocess.

The starter suite (``examples/evals``) on its deterministic scripted model passes exactly
9 of 9. A deterministic model on a loopback fake OpenAI server that solves two tasks of four
and fails the others (one by its check, one by its answer) gives exactly the expected pass
rate, JSON and exit code; the same model made worse is flagged against the first run's JSON
(exit 1); ``--resume`` runs nothing already scored; and the eval is still there, with every
run, after a restart of the whole stack. A check that tries to read the stack's secrets and
write outside its run's directory sees neither.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import yaml
from longhaul.domain.evals import wilson

from tests.integration.cli.harness import cli_env, longhaul, running_up
from tests.support.llm_fakes import Call, FakeOpenAI, RecordedRequest, Reply

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "evals"
EVAL_DEADLINE_S = 300.0

FAKE_SUITE = """\
name: fake
defaults: {max_iterations: 6, experiences: false, tools: [write, read]}
tasks:
  - id: solve-write
    prompt: "TASK solve-write: write ok.txt containing ok"
    check: "grep -qx ok ok.txt"
  - id: solve-answer
    prompt: "TASK solve-answer: what is six times seven?"
    answer: "\\\\b42\\\\b"
  - id: fail-check
    prompt: "TASK fail-check: write ok.txt containing ok"
    check: "grep -qx ok ok.txt"
  - id: fail-answer
    prompt: "TASK fail-answer: what is six times seven?"
    answer: "\\\\b42\\\\b"
"""


class Solver:
    """The fake model: answers by the task named in the first user message, so every run of
    a task goes the same way whatever order the runs take. ``worse``: it forgets 42."""

    def __init__(self) -> None:
        self.worse = False

    def __call__(self, request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        first = next(m for m in messages if m["role"] == "user")["content"]
        prompt = first if isinstance(first, str) else json.dumps(first)
        answered = sum(1 for m in messages if m["role"] == "assistant")
        if "solve-write" in prompt or "fail-check" in prompt:
            if answered == 0:
                content = "ok\n" if "solve-write" in prompt else "not ok\n"
                return Reply(tool_calls=[Call("write", {"path": "ok.txt", "content": content})])
            return Reply(text="ok.txt written")
        if "solve-answer" in prompt:
            return Reply(text="41" if self.worse else "It is 42.")
        return Reply(text="I do not know.")


def _document(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


async def test_eval_scores_exactly_resumes_flags_regressions_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    shutil.copy(EXAMPLES / "scripted.yaml", tmp_path / "scripted.yaml")
    scripted = f"scripted:{tmp_path / 'scripted.yaml'}"
    suite = tmp_path / "fake.yaml"
    suite.write_text(FAKE_SUITE)
    solver = Solver()
    data = tmp_path / "data"
    async with FakeOpenAI(default=solver) as fake:
        env = cli_env(OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=fake.api_key)
        async with running_up(data, env) as url:
            # The starter suite on its scripted model: every task passes.
            starter = tmp_path / "starter.json"
            result = await longhaul(
                "eval", str(EXAMPLES / "starter.yaml"), "--model", scripted,
                "--json", str(starter), url=url, env=env, deadline_s=EVAL_DEADLINE_S,
            )  # fmt: skip
            assert result.code == 0, result.output
            document = _document(starter)
            assert document["suite"] == "starter"
            summary = document["summary"][scripted]
            assert (summary["passed"], summary["total"], summary["pass_rate"]) == (9, 9, 1.0)
            assert "9/9" in result.stdout
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                for run in document["runs"]:
                    trace = (await client.get(f"/api/traces/{run['trace_id']}")).json()
                    assert trace["eval"]["eval_id"] == document["eval_id"]
                    assert trace["eval"]["task"] == run["task"]

            # The attack: a check that reads the stack's NATS passwords and writes outside
            # the run's working directory. It runs sandboxed: it sees neither, and fails.
            escape = tmp_path / "escaped"
            attack = tmp_path / "attack.yaml"
            attack.write_text(
                "name: attack\ntasks:\n  - id: escape\n    prompt: nothing to do\n"
                f"    check: \"cat '{data / 'nats-credentials.json'}'; touch '{escape}'\"\n"
            )
            result = await longhaul(
                "eval", str(attack), "--model", scripted, "--json", str(tmp_path / "attack.json"),
                "--threshold", "0", url=url, env=env, deadline_s=EVAL_DEADLINE_S,
            )  # fmt: skip
            assert result.code == 0, result.output
            [run] = _document(tmp_path / "attack.json")["runs"]
            assert run["status"] == "completed" and run["passed"] is False
            assert "check failed" in run["reasons"][0]
            assert not escape.exists()
            secrets = json.loads((data / "nats-credentials.json").read_text())
            assert not any(password in run["reasons"][0] for password in secrets.values())

            # The fake model: two tasks solved, two failed, twice each.
            first = tmp_path / "first.json"
            model = "openai:fake-model"
            result = await longhaul(
                "eval", str(suite), "--model", model, "--repeat", "2", "--concurrency", "3",
                "--json", str(first), url=url, env=env, deadline_s=EVAL_DEADLINE_S,
            )  # fmt: skip
            assert result.code == 1, result.output  # by default, any failed run fails the eval
            assert "4/8 passed (50%), under 100%" in result.stdout
            document = _document(first)
            assert set(document) == {"eval_id", "suite", "summary", "runs"}
            low, high = wilson(4, 8)
            summary = document["summary"][model]
            assert {k: summary[k] for k in ("passed", "total", "pass_rate", "cost_total")} == {
                "passed": 4,
                "total": 8,
                "pass_rate": 0.5,
                "cost_total": 0.0,
            }
            assert (summary["ci_low"], summary["ci_high"]) == (low, high)
            assert summary["tokens_median"] == 180.0  # 2 calls x 120 and 1 call x 120
            runs = {(r["task"], r["repeat"]): r for r in document["runs"]}
            assert len(runs) == 8
            for (task, _), run in runs.items():
                assert run["passed"] is task.startswith("solve"), run
                assert run["status"] == "completed"
                assert run["model"] == model
                assert run["tokens"] == (240 if "write" in task or "check" in task else 120)
                assert run["recovered"] is False
                assert {"trace_id", "cost", "duration_s"} <= set(run)
            assert "check failed" in runs[("fail-check", 0)]["reasons"][0]
            assert "does not match" in runs[("fail-answer", 1)]["reasons"][0]

            # Nothing scored runs again on --resume (the fake sees no request).
            seen = len(fake.requests)
            result = await longhaul(
                "eval",
                str(suite),
                "--resume",
                document["eval_id"],
                "--threshold",
                "0.5",
                url=url,
                env=env,
            )
            assert result.code == 0, result.output
            assert "8 already scored" in result.stdout
            assert len(fake.requests) == seen

            # --replay plays every recorded run's model turns again, without the model: the
            # same scores, nothing diverged, no regression against the record.
            replayed = tmp_path / "replayed.json"
            result = await longhaul(
                "eval", str(suite), "--replay", document["eval_id"], "--json", str(replayed),
                "--threshold", "0.5", url=url, env=env, deadline_s=EVAL_DEADLINE_S,
            )  # fmt: skip
            assert result.code == 0, result.output
            assert len(fake.requests) == seen
            again = _document(replayed)
            assert again["eval_id"] != document["eval_id"]
            assert (again["summary"][model]["passed"], again["summary"][model]["total"]) == (4, 8)
            assert [r for r in again["runs"] if r.get("diverged")] == []
            assert "no regression against the baseline" in result.stdout

            # The same record replayed against a suite that took the write tool away: the
            # recorded write now answers otherwise, which the replay names, and scores worse.
            no_write = tmp_path / "no-write.yaml"
            no_write.write_text(FAKE_SUITE.replace("tools: [write, read]", "tools: [read]"))
            result = await longhaul(
                "eval", str(no_write), "--replay", document["eval_id"], "--json",
                str(tmp_path / "no-write.json"), url=url, env=env, deadline_s=EVAL_DEADLINE_S,
            )  # fmt: skip
            assert result.code == 1, result.output
            assert len(fake.requests) == seen
            runs_now = {
                (r["task"], r["repeat"]): r for r in _document(tmp_path / "no-write.json")["runs"]
            }
            assert "write answered" in runs_now[("solve-write", 0)]["diverged"]
            assert runs_now[("solve-answer", 0)]["diverged"] is None
            flat = " ".join(result.stdout.split())
            assert "diverged" in flat and "task solve-write passed in every baseline repeat" in flat

            # A recorded run becomes a task of a suite, comments and all.
            grown = tmp_path / "grown.yaml"
            grown.write_text("# kept\n" + FAKE_SUITE)
            result = await longhaul(
                "eval", "add", str(grown), runs[("solve-write", 0)]["trace_id"],
                "--check", "grep -qx ok ok.txt", "--id", "from-trace", url=url, env=env,
            )  # fmt: skip
            assert result.code == 0, result.output
            assert grown.read_text().startswith("# kept\n")
            added = yaml.safe_load(grown.read_text())["tasks"][-1]
            assert added["id"] == "from-trace"
            assert added["prompt"] == "TASK solve-write: write ok.txt containing ok"
            assert added["check"] == "grep -qx ok ok.txt"
            assert added["tools"] == ["write", "read"]

            # The model gets worse: solve-answer passed in every baseline repeat, now fails.
            solver.worse = True
            result = await longhaul(
                "eval", str(suite), "--model", model, "--repeat", "2",
                "--baseline", str(first), url=url, env=env, deadline_s=EVAL_DEADLINE_S,
            )  # fmt: skip
            assert result.code == 1, result.output
            assert "task solve-answer passed in every baseline repeat and now fails" in (
                result.stdout.replace("\n", " ")
            )

        # A restart of everything: the eval and its runs are still there.
        async with running_up(data, env) as url:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                listed = (await client.get("/api/evals")).json()["evals"]
                assert document["eval_id"] in {e["eval_id"] for e in listed}
                stored = (await client.get(f"/api/evals/{document['eval_id']}")).json()
                assert len(stored["runs"]) == 8
                assert stored["summary"][model]["passed"] == 4


async def test_a_bad_suite_is_refused_with_every_problem_named(tmp_path: Path) -> None:
    """No gateway is needed to refuse a suite: nothing is sent (the URL leads nowhere)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\ntasks:\n  - id: a\n    prompt: p\n    files: {'../escape': x}\n"
        "    answer: '('\n  - prompt: no id\n"
    )
    result = await longhaul("eval", str(bad), url="http://127.0.0.1:9")
    assert result.code == 2, result.output
    flat = " ".join(result.stderr.split())
    assert "tasks[0].files" in flat and "'../escape'" in flat
    assert "tasks[0].answer" in flat and "not a regular expression" in flat
    assert "tasks[1].id: Field required" in flat
    baseline = tmp_path / "not-a-baseline.json"
    baseline.write_text('{"runs": []}')
    result = await longhaul(
        "eval",
        str(EXAMPLES / "starter.yaml"),
        "--baseline",
        str(baseline),
        url="http://127.0.0.1:9",
    )
    assert result.code == 2 and "not the JSON of `longhaul eval --json`" in result.stderr


def _outcomes(document: dict[str, Any]) -> dict[tuple[str, int], tuple[str, bool]]:
    return {(r["task"], r["repeat"]): (r["status"], r["passed"]) for r in document["runs"]}


async def test_chaos_kills_executors_and_the_results_equal_a_run_without_faults(
    tmp_path: Path,
) -> None:
    """``--chaos executor:2`` on two executors: two SIGKILLs land while runs are in flight,
    the runs hit are reported recovered, and every task ends as it did without faults."""
    shutil.copy(EXAMPLES / "scripted.yaml", tmp_path / "scripted.yaml")
    script = f"scripted:{tmp_path / 'scripted.yaml'}"
    # Slow enough model calls that a kill finds runs in flight; the run without faults needs
    # no such room (the scripted model answers the same at any speed), so it goes flat out.
    model = f"{script}?latency_ms=300"
    data = tmp_path / "data"
    env = cli_env()
    starter = str(EXAMPLES / "starter.yaml")
    repeat = ("--repeat", "3")  # room for two kills and their restarts
    async with running_up(data, env, executors=2) as url:
        calm, chaos = tmp_path / "calm.json", tmp_path / "chaos.json"
        result = await longhaul(
            "eval", starter, "--model", script, "--json", str(calm), *repeat,
            "--concurrency", "6", url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 0, result.output
        result = await longhaul(
            "eval", starter, "--model", model, "--json", str(chaos), *repeat,
            "--concurrency", "2", "--chaos", "executor:2", "--data-dir", str(data),
            url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 0, result.output
        assert result.stdout.count("chaos: SIGKILL executor-") == 2, result.output
        calm_document, chaos_document = _document(calm), _document(chaos)
        assert _outcomes(chaos_document) == _outcomes(calm_document)
        assert calm_document["summary"][script]["passed"] == 27
        assert sum(r["recovered"] for r in chaos_document["runs"]) >= 1
        assert chaos_document["summary"][model]["recovered"] >= 1

        # --chaos needs the stack it talks to.
        elsewhere = await longhaul(
            "eval", starter, "--chaos", "executor", "--data-dir", str(tmp_path / "none"),
            url=url, env=env,
        )  # fmt: skip
        assert elsewhere.code == 2 and "no running `longhaul up`" in elsewhere.stderr


JUDGE_SCRIPT = """\
by_prompt:
  - match: "1\\\\. The answer is the number 16"
    turns:
      - content: '{"criteria": [{"criterion": "16", "score": 9, "reason": "it says 16"}],
          "verdict": "pass", "feedback": "fine"}'
  - match: "1\\\\. The answer mentions the moon"
    turns:
      - content: '{"criteria": [{"criterion": "moon", "score": 1, "reason": "no moon"}],
          "verdict": "fail", "feedback": "say the moon"}'
"""
SUM_PROMPT = (
    "Use bash to add up the numbers in data/numbers.txt (one per line). Answer with the total only."
)
JSON_PROMPT = (
    'Answer with a JSON object whose status is "ok" and whose count is 3, and nothing else.'
)


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


async def test_datasets_checks_threshold_task_selection_replay_and_lists(tmp_path: Path) -> None:
    """A JSONL and a CSV dataset, the check library (contains from ``target``, regex, equals,
    JSON schema, a graded rubric on its own scripted judge), ``--threshold`` and the exit
    code, ``--task``, ``-o json``, a replay of a sub-agent that diverges nowhere, ``traces ls``
    without eval runs, and a run's 409 as one line."""
    shutil.copy(EXAMPLES / "scripted.yaml", tmp_path / "scripted.yaml")
    scripted = f"scripted:{tmp_path / 'scripted.yaml'}"
    (tmp_path / "judge.yaml").write_text(JUDGE_SCRIPT)
    judge = f"scripted:{tmp_path / 'judge.yaml'}"
    rows = tmp_path / "rows.jsonl"
    schema = {"type": "object", "required": ["count"], "properties": {"count": {"const": 3}}}
    rows.write_text(
        _jsonl(
            [
                {"id": "sum", "input": SUM_PROMPT, "target": "16"},
                {
                    "prompt": JSON_PROMPT,
                    "checks": [
                        {"type": "json_schema", "value": schema},
                        {"type": "regex", "value": '"count":\\s*3'},
                        {"type": "equals", "value": '{"status": "ok", "count": 3}'},
                    ],
                },
                {"id": "wrong", "input": SUM_PROMPT, "target": "17"},
            ]
        )
    )
    (tmp_path / "rows.csv").write_text(f'q,gold\n"{SUM_PROMPT}",16\n')
    graded = tmp_path / "graded.yaml"
    graded.write_text(
        "name: graded\n"
        "dataset: {path: rows.csv, prompt: 'Please. {q}', fields: {expected: gold}}\n"
        f"checks: [{{type: rubric, value: 'The answer is the number 16', model: '{judge}'}}]\n"
        "tasks:\n"
        f"  - id: moon\n    prompt: '{SUM_PROMPT}'\n"
        f"    checks: [{{type: rubric, value: 'The answer mentions the moon', model: '{judge}'}}]\n"
    )
    env = cli_env()
    async with running_up(tmp_path / "data", env) as url:
        # One failed run of three: exit 1 by default, with the reason; 0 at --threshold 0.6.
        result = await longhaul(
            "eval", str(rows), "--model", scripted, "-o", "json",
            url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 1, result.output
        assert "below the threshold" in result.stderr and "2/3 passed" in result.stderr
        document = json.loads(result.stdout)
        runs = {r["task"]: r for r in document["runs"]}
        assert set(runs) == {"sum", "row-2", "wrong"}
        assert runs["sum"]["passed"] and runs["row-2"]["passed"], runs
        assert [c["passed"] for c in runs["row-2"]["checks"]] == [True, True, True]
        assert runs["wrong"]["passed"] is False
        assert "does not contain '17'" in runs["wrong"]["reasons"][0]
        assert runs["sum"]["output"] == "16" and runs["sum"]["ended_at"] > 0
        result = await longhaul(
            "eval", str(rows), "--model", scripted, "--threshold", "0.6",
            url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 0, result.output

        # The rubric: graded by its own model, its verdict recorded with the scores.
        result = await longhaul(
            "eval", str(graded), "--model", scripted, "-o", "json",
            url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 1, result.output
        runs = {r["task"]: r for r in json.loads(result.stdout)["runs"]}
        assert runs["row-1"]["passed"], runs["row-1"]
        assert [c["check"].split()[0] for c in runs["row-1"]["checks"]] == ["rubric", "contains"]
        assert "[9/10]" in runs["row-1"]["checks"][0]["detail"]
        assert runs["moon"]["passed"] is False
        assert "no moon" in runs["moon"]["reasons"][-1]

        # --task picks runs; a replay of a sub-agent run diverges nowhere (new ids only).
        result = await longhaul(
            "eval", str(EXAMPLES / "starter.yaml"), "--model", scripted, "-o", "json",
            "--task", "sub-agent", "--task", "long-output",
            url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 0, result.output
        recorded = json.loads(result.stdout)
        assert sorted(r["task"] for r in recorded["runs"]) == ["long-output", "sub-agent"]
        result = await longhaul(
            "eval", str(EXAMPLES / "starter.yaml"), "--replay", recorded["eval_id"],
            "--task", "sub-agent", "--task", "long-output", "-o", "json",
            url=url, env=env, deadline_s=EVAL_DEADLINE_S,
        )  # fmt: skip
        assert result.code == 0, result.output
        replayed = json.loads(result.stdout)["runs"]
        assert len(replayed) == 2 and all(r["passed"] for r in replayed)
        assert [r["diverged"] for r in replayed] == [None, None]

        # traces ls leaves the eval runs out unless --evals.
        result = await longhaul("traces", "ls", "-o", "json", url=url, env=env)
        assert result.code == 0, result.output
        assert json.loads(result.stdout) == []
        result = await longhaul("traces", "ls", "--evals", "-o", "json", url=url, env=env)
        listed = json.loads(result.stdout)
        assert listed and all(t["eval_id"] for t in listed)

        # A run the gateway refuses (409: the replayed eval never scored it) is one line.
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            suite = yaml.safe_load((EXAMPLES / "starter.yaml").read_text())
            created = await client.post("/api/evals", json={"suite": suite, "models": [scripted]})
            assert created.status_code == 201, created.text
        result = await longhaul(
            "eval", str(EXAMPLES / "starter.yaml"), "--replay", created.json()["eval_id"],
            "--task", "bash-sum", url=url, env=env,
        )  # fmt: skip
        assert result.code == 1, result.output
        assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
        assert "no recorded run to replay" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
