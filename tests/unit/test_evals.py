"""The eval suite format, the result arithmetic and what counts as a regression
(``longhaul.domain.evals``); the per-prompt scripted model the starter suite runs on; an eval
task's files written below sub-directories, never through a planted link."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from longhaul.agent.engine.uploads import _write
from longhaul.agent.errors import ToolError
from longhaul.cli.chaos import ChaosError, local_stack, parse_chaos
from longhaul.domain import evals
from longhaul.llm.scripted import load_script
from longhaul.llm.types import ModelRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "evals"


def test_the_starter_suite_parses_and_covers_what_it_promises() -> None:
    suite = evals.load_suite(EXAMPLES / "starter.yaml")
    assert len(suite.tasks) >= 8
    prompts = " ".join(t.prompt for t in suite.tasks)
    for feature in ("bash", "sub-agent", "goal tool", "seq 1 20000"):
        assert feature in prompts
    assert any(t.files for t in suite.tasks) and any(t.check for t in suite.tasks)
    assert any("verification" in t.settings() for t in suite.tasks)


def test_a_bad_suite_names_every_problem() -> None:
    with pytest.raises(evals.SuiteError) as refused:
        evals.parse_suite(
            {
                "name": "x",
                "surprise": 1,
                "tasks": [
                    {"id": "a b", "prompt": "p", "files": {"/etc/passwd": "x"}},
                    {"id": "ok", "prompt": "p", "answer": "[", "files": {"a/../b": "x"}},
                    {"id": "ok", "prompt": "q"},
                ],
            }
        )
    message = str(refused.value)
    assert "surprise: Extra inputs are not permitted" in message
    assert "tasks[0].id" in message and "tasks[0].files" in message
    assert "tasks[1].answer" in message and "tasks[1].files" in message
    with pytest.raises(evals.SuiteError, match="appears twice"):
        evals.parse_suite({"name": "x", "tasks": [{"id": "a", "prompt": "p"}] * 2})
    with pytest.raises(evals.SuiteError, match="a suite is a mapping"):
        evals.parse_suite(["not", "a", "suite"])


def test_a_suite_file_that_is_not_yaml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ntasks: [\n")
    with pytest.raises(evals.SuiteError, match=r"not valid YAML at line \d+"):
        evals.load_suite(path)


def test_a_runs_body_is_defaults_then_the_tasks_own_fields() -> None:
    suite = evals.parse_suite(
        {
            "name": "s",
            "defaults": {"max_iterations": 5, "tools": ["read"]},
            "tasks": [{"id": "t", "prompt": "do it", "tools": ["bash"], "check": "true"}],
        }
    )
    body = suite.body(suite.tasks[0], "scripted:auto")
    assert body == {
        "max_iterations": 5,
        "tools": ["bash"],
        "messages": [{"role": "user", "content": "do it"}],
        "model": "scripted:auto",
        "name": "s/t",
    }


def test_wilson_intervals() -> None:
    low, high = evals.wilson(9, 9)
    assert round(low, 4) == 0.7009 and high == 1.0
    low, high = evals.wilson(0, 10)
    assert low == 0.0 and round(high, 4) == 0.2775
    low, high = evals.wilson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.2366, 0.7634)
    assert evals.wilson(0, 0) == (0.0, 1.0)


def test_percentiles_interpolate() -> None:
    assert evals.percentile([1, 2, 3, 4], 0.5) == 2.5
    assert evals.percentile([10.0], 0.9) == 10.0
    assert evals.percentile([], 0.5) == 0.0
    assert evals.percentile([0, 10], 0.9) == 9.0


def _run(task: str, passed: bool, repeat: int = 0, tokens: int = 100, cost: float = 1.0) -> Any:
    return evals.RunResult(
        task=task,
        model="m",
        repeat=repeat,
        trace_id=f"t_{task}{repeat}",
        status="completed",
        passed=passed,
        tokens=tokens,
        cost=cost,
    )


def _document(*runs: evals.RunResult) -> dict[str, Any]:
    return {
        "summary": evals.summarize(runs),
        "runs": [{"task": r.task, "model": r.model, "passed": r.passed} for r in runs],
    }


def test_the_same_results_are_no_regression() -> None:
    runs = [_run("a", True, k) for k in range(3)] + [_run("b", False, k) for k in range(3)]
    assert evals.regressions(_document(*runs), _document(*runs)) == []


def test_a_task_that_always_passed_and_now_fails_once_regressed() -> None:
    before = _document(
        _run("a", True, 0), _run("a", True, 1), _run("b", True, 0), _run("b", False, 1)
    )
    after = _document(
        _run("a", True, 0), _run("a", False, 1), _run("b", False, 0), _run("b", False, 1)
    )
    found = evals.regressions(after, before)
    assert found[0] == "m: task a passed in every baseline repeat and now fails"
    assert not any("task b" in line for line in found)  # b was flaky already


def test_a_pass_rate_below_the_baseline_interval_regressed() -> None:
    before = _document(*[_run(f"t{n}", True) for n in range(20)])
    after = _document(*[_run(f"t{n}", n < 10) for n in range(20)])
    found = evals.regressions(after, {**before, "runs": []})  # only the rate rule can fire
    assert len(found) == 1 and "pass rate 50% below the baseline's interval" in found[0]


def test_tokens_or_cost_up_more_than_a_fifth_regressed() -> None:
    before = _document(_run("a", True, tokens=100, cost=1.0))
    assert evals.regressions(_document(_run("a", True, tokens=120, cost=1.2)), before) == []
    found = evals.regressions(_document(_run("a", True, tokens=121, cost=1.5)), before)
    assert [line.split(" up ")[0] for line in found] == ["m: median tokens", "m: cost"]


def _request(*messages: dict[str, Any]) -> ModelRequest:
    return ModelRequest(model="scripted:test", messages=list(messages))


def test_a_script_per_prompt_plays_by_the_first_user_message(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "by_prompt:\n"
        "  - {match: 'sub-task', turns: [{content: child}]}\n"
        "  - {match: 'main', turns: [{content: one}, {content: two}]}\n"
    )
    script = load_script(path)
    assert script(_request({"role": "user", "content": "the main task"})) == {"content": "one"}
    second = _request(
        {"role": "user", "content": "the main task"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "a sub-task mentioned later"},
    )
    assert script(second) == {"content": "two"}
    assert script(_request({"role": "user", "content": "a sub-task"})) == {"content": "child"}
    assert "no script" in script(_request({"role": "user", "content": "else"}))["content"]
    path.write_text("by_prompt:\n  - {match: '(', turns: []}\n")
    with pytest.raises(ValueError, match=r"by_prompt\[0\]\.match"):
        load_script(path)


def test_initial_files_land_in_sub_directories(tmp_path: Path) -> None:
    _write(tmp_path, "notes/deep/seed.txt", b"seed")
    assert (tmp_path / "notes" / "deep" / "seed.txt").read_bytes() == b"seed"
    for name in ("../escape.txt", "notes/../../escape.txt", "/etc/passwd", "notes/.hidden", "a//b"):
        with pytest.raises(ValueError, match="unsafe upload name"):
            _write(tmp_path, name, b"x")
    assert not (tmp_path.parent / "escape.txt").exists()


def test_a_planted_directory_link_is_never_followed(tmp_path: Path) -> None:
    """The attack: a link named like a file's directory, pointing outside the working
    directory, so that the write lands there."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    os.symlink(outside, work / "notes")
    with pytest.raises(ToolError, match="out of the working directory"):
        _write(work, "notes/seed.txt", b"x")
    assert list(outside.iterdir()) == []


def test_chaos_options_and_the_stack_they_need(tmp_path: Path) -> None:
    assert parse_chaos("executor") == 2 and parse_chaos("executor:5") == 5
    for bad in ("gateway", "executor:x", "executor:0"):
        with pytest.raises(ChaosError):
            parse_chaos(bad)
    with pytest.raises(ChaosError, match="no running `longhaul up`"):
        local_stack(tmp_path, "http://127.0.0.1:8080")
    state = {"gateway": "http://127.0.0.1:8080", "children": {"executor-1": 10, "gateway": 11}}
    (tmp_path / "up.json").write_text(json.dumps(state))
    with pytest.raises(ChaosError, match=r"not http://127\.0\.0\.1:9 "):
        local_stack(tmp_path, "http://127.0.0.1:9")
    assert local_stack(tmp_path, "http://127.0.0.1:8080/") == tmp_path / "up.json"


def test_a_jsonl_or_csv_dataset_is_a_suite_of_one_task_per_row(tmp_path: Path) -> None:
    rows = tmp_path / "qa.jsonl"
    rows.write_text(
        '{"id": "a", "input": "two plus two?", "target": "4"}\n\n'
        '{"question": "capital of France?", "check": "test -f x", "files": {"x.txt": "x"}}\n'
    )
    suite = evals.load_suite(rows)
    assert suite.name == "qa" and [t.id for t in suite.tasks] == ["a", "row-2"]
    assert suite.tasks[0].prompt == "two plus two?"
    [contains] = suite.tasks[0].checks
    assert (contains.type, contains.value, contains.ignore_case) == ("contains", "4", True)
    assert suite.tasks[1].check == "test -f x" and suite.tasks[1].files == {"x.txt": "x"}
    table = tmp_path / "qa.csv"
    table.write_text('qid,q,gold,topic\nq1,"two, plus two?",4,maths\n')
    mapped = tmp_path / "mapped.yaml"
    mapped.write_text(
        "name: mapped\ndefaults: {max_iterations: 3}\n"
        "checks: [{type: regex, value: '\\d'}]\n"
        "dataset: {path: qa.csv, prompt: '[{topic}] {q}', fields: {id: qid, expected: gold}}\n"
    )
    suite = evals.load_suite(mapped)
    [task] = suite.tasks
    assert (task.id, task.prompt) == ("q1", "[maths] two, plus two?")
    assert [c.type for c in suite.checks_of(task)] == ["regex", "contains"]


def test_a_bad_dataset_or_check_is_refused_with_where(tmp_path: Path) -> None:
    rows = tmp_path / "bad.jsonl"
    rows.write_text('{"prompt": "ok"}\nnot json\n')
    with pytest.raises(evals.SuiteError, match="line 2 is not JSON"):
        evals.load_suite(rows)
    templated = tmp_path / "t.yaml"
    (tmp_path / "t.csv").write_text("q\nhello\n")
    templated.write_text("name: t\ndataset: {path: t.csv, prompt: '{missing}'}\n")
    with pytest.raises(evals.SuiteError, match="row 1: the prompt template needs 'missing'"):
        evals.load_suite(templated)
    with pytest.raises(evals.SuiteError) as refused:
        evals.parse_suite(
            {
                "name": "x",
                "tasks": [
                    {
                        "id": "a",
                        "prompt": "p",
                        "checks": [
                            {"type": "regex", "value": "("},
                            {"type": "json_schema", "value": "not a schema"},
                            {"type": "contains", "value": "x", "model": "openai:gpt-4o"},
                            {"type": "nearly", "value": "x"},
                        ],
                    }
                ],
            }
        )
    message = str(refused.value)
    for index in range(4):
        assert f"tasks[0].checks[{index}]" in message
    assert "not a regular expression" in message and "only a rubric check takes a model" in message


def test_only_picks_tasks_by_id_in_suite_order_then_the_first_n() -> None:
    suite = evals.parse_suite(
        {"name": "s", "tasks": [{"id": i, "prompt": "p"} for i in ("a", "b", "c")]}
    )
    assert [t.id for t in suite.only(["c", "a"]).tasks] == ["a", "c"]
    assert [t.id for t in suite.only(limit=2).tasks] == ["a", "b"]
    with pytest.raises(evals.SuiteError, match="no task 'z'"):
        suite.only(["z"])


def test_contains_and_equals_are_judged_from_the_answer_alone() -> None:
    def verdict(kind: str, value: str, answer: str, **extra: Any) -> bool:
        check = evals.Check(type=kind, value=value, **extra)  # type: ignore[arg-type]
        found = evals.check_text(check, answer)
        assert found is not None
        return found.passed

    assert verdict("contains", "Paris", "It is Paris.")
    assert not verdict("contains", "paris", "It is Paris.")
    assert verdict("contains", "paris", "It is Paris.", ignore_case=True)
    assert verdict("equals", "42", " 42\n") and not verdict("equals", "42", "42!")
    assert evals.check_text(evals.Check(type="regex", value="4"), "4") is None  # the verifier's
