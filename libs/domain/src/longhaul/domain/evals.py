"""Evals: a suite of tasks run many times against models, scored, and compared with an
earlier run (``longhaul eval``, ``/api/evals``).

Pure: the suite's format (pydantic, so a bad suite is refused with every problem named), the
records the gateway stores per API key, and the arithmetic of a result table — pass rate with
its 95 % Wilson interval, medians and percentiles, and what counts as a regression against a
baseline. The CLI and the gateway share it, so a suite means the same on both sides.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
FILE_PATH = re.compile(
    r"^(?!\.)[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}(/(?!\.)[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}){0,7}$"
)
"""A relative path of plain names (no ``..``, no dot files, no absolute path)."""
MAX_TASKS = 500
MAX_FILES = 20
MAX_FILE_BYTES = 256 * 1024
MAX_REPEAT = 100
MAX_MODELS = 16
CHECK_TIMEOUT_S = 120.0
"""How long a task's ``check`` may run (sandboxed, in the run's working directory)."""
REGRESSION_GROWTH = 0.20
"""Median tokens or total cost up by more than this fraction is a regression."""

MAX_CHECKS = 16
MAX_OUTPUT_CHARS = 4000
"""A run's final answer is kept this long in its scored record (the viewer shows it)."""
DATASET_SUFFIXES = (".jsonl", ".csv")

TaskId = Annotated[str, StringConstraints(pattern=TASK_ID)]
CheckType = Literal["contains", "regex", "equals", "json_schema", "rubric"]


class SuiteError(ValueError):
    """A suite that cannot run; the message names every problem (``tasks[2].check: …``)."""


class Check(BaseModel):
    """One check of the library, on the run's final answer (promptfoo's ``assert``,
    inspect-ai's scorers). ``contains``/``equals``/``regex`` take a string (``equals``
    compares with surrounding whitespace stripped), ``json_schema`` a schema the answer's
    JSON must match, ``rubric`` the criteria a model grades the answer against (its own
    ``model``, the verifier's by default; a criterion passes at ``pass_score`` of 10). The
    verifier runs them once the run completes and records each verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: CheckType
    value: str | dict[str, Any] | list[str]
    ignore_case: bool = False
    model: str | None = Field(default=None, min_length=1, max_length=256)
    pass_score: float = Field(default=7.0, ge=0, le=10)

    @model_validator(mode="after")
    def _value(self) -> Check:
        if self.type == "json_schema":
            if not isinstance(self.value, dict):
                raise ValueError("a json_schema check's value is a schema (a mapping)")
        elif self.type == "rubric":
            criteria = [self.value] if isinstance(self.value, str) else self.value
            if not isinstance(criteria, list) or not criteria or not all(criteria):
                raise ValueError("a rubric check's value is a criterion or a list of them")
        elif not isinstance(self.value, str) or not self.value:
            raise ValueError(f"a {self.type} check's value is a non-empty string")
        elif self.type == "regex":
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"value is not a regular expression: {exc}") from None
        if self.model is not None and self.type != "rubric":
            raise ValueError("only a rubric check takes a model")
        return self

    @property
    def criteria(self) -> list[str]:
        """A rubric's criteria."""
        return [self.value] if isinstance(self.value, str) else list(self.value)

    def label(self) -> str:
        if self.type == "json_schema":
            return "json_schema"
        shown = self.value if isinstance(self.value, str) else "; ".join(self.criteria)
        return f"{self.type} {shown[:80]!r}"


class CheckVerdict(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What one check said of a run (``detail``: why it failed, or the grader's scores)."""

    check: str
    passed: bool
    detail: str = ""
    skipped: bool = False


def check_text(check: Check, answer: str) -> CheckVerdict | None:
    """The verdict of a check that needs nothing but the answer (contains, equals); ``None``
    for one that needs the verifier (regex in linear time, JSON schema, a grading model)."""
    if check.type not in ("contains", "equals") or not isinstance(check.value, str):
        return None
    want, got = check.value, answer
    if check.ignore_case:
        want, got = want.casefold(), got.casefold()
    if check.type == "contains":
        passed = want in got
        detail = "" if passed else f"the answer does not contain {check.value!r}"
    else:
        passed = want.strip() == got.strip()
        detail = "" if passed else f"the answer is not {check.value!r}"
    return CheckVerdict(check=check.label(), passed=passed, detail=detail)


class EvalTask(BaseModel):
    """One task. Keys besides these are ``POST /api/traces`` fields for this task alone
    (``verification``, ``tools``, ``max_iterations`` …), over the suite's ``defaults``."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: TaskId
    prompt: str = Field(min_length=1, max_length=100_000)
    files: dict[str, str] = Field(default_factory=dict, max_length=MAX_FILES)
    check: str | None = Field(default=None, min_length=1, max_length=4096)
    answer: str | None = Field(default=None, min_length=1, max_length=1024)
    checks: list[Check] = Field(default_factory=list, max_length=MAX_CHECKS)

    @field_validator("files")
    @classmethod
    def _paths(cls, files: dict[str, str]) -> dict[str, str]:
        for path, content in files.items():
            if not FILE_PATH.fullmatch(path):
                raise ValueError(
                    f"file path {path!r}: relative, plain names (letters, digits, . _ -), "
                    "no '..' and no dot files"
                )
            if len(content.encode()) > MAX_FILE_BYTES:
                raise ValueError(f"file {path!r} is over {MAX_FILE_BYTES} bytes")
        return files

    @field_validator("answer")
    @classmethod
    def _regex(cls, answer: str | None) -> str | None:
        if answer is not None:
            try:
                re.compile(answer)
            except re.error as exc:
                raise ValueError(f"answer is not a regular expression: {exc}") from None
        return answer

    def settings(self) -> dict[str, Any]:
        """The ``POST /api/traces`` fields this task sets itself."""
        return dict(self.model_extra or {})


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128)
    defaults: dict[str, Any] = Field(
        default_factory=dict, description="any POST /api/traces field, for every task"
    )
    tasks: list[EvalTask] = Field(min_length=1, max_length=MAX_TASKS)
    checks: list[Check] = Field(
        default_factory=list, max_length=MAX_CHECKS, description="for every task, before its own"
    )

    @field_validator("tasks")
    @classmethod
    def _unique(cls, tasks: list[EvalTask]) -> list[EvalTask]:
        seen: set[str] = set()
        for task in tasks:
            if task.id in seen:
                raise ValueError(f"task id {task.id!r} appears twice")
            seen.add(task.id)
        return tasks

    def task(self, task_id: str) -> EvalTask | None:
        return next((t for t in self.tasks if t.id == task_id), None)

    def checks_of(self, task: EvalTask) -> list[Check]:
        """The library checks a task's runs are scored by: the suite's, then its own."""
        return [*self.checks, *task.checks]

    def only(self, task_ids: Sequence[str] = (), limit: int | None = None) -> Suite:
        """The suite cut to the named tasks (in the suite's order), then to its first
        ``limit``; :class:`SuiteError` naming a task it does not have."""
        unknown = [t for t in task_ids if self.task(t) is None]
        if unknown:
            raise SuiteError(f"no task {', '.join(map(repr, unknown))} in suite {self.name!r}")
        tasks = [t for t in self.tasks if not task_ids or t.id in task_ids][:limit]
        return self.model_copy(update={"tasks": tasks})

    def body(self, task: EvalTask, model: str) -> dict[str, Any]:
        """The ``POST /api/traces`` body of one run (``defaults``, the task's own fields, the
        prompt as its user message, the model)."""
        body = {**self.defaults, **task.settings()}
        body["messages"] = [{"role": "user", "content": task.prompt}]
        body["model"] = model
        body.setdefault("name", f"{self.name}/{task.id}")
        return body


def describe(error: ValidationError) -> str:
    """Every problem of a refused suite, one per line, located like ``tasks[2].check``."""
    lines = []
    for problem in error.errors():
        where = ""
        for part in problem["loc"]:
            where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
        lines.append(f"{where or 'suite'}: {problem['msg']}")
    return "\n".join(lines)


def parse_suite(data: Any) -> Suite:
    """A suite from parsed YAML/JSON; :class:`SuiteError` naming what is wrong."""
    if not isinstance(data, dict):
        raise SuiteError(f"a suite is a mapping (name, defaults, tasks), got {type(data).__name__}")
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(describe(exc)) from None


PROMPT_COLUMNS = ("prompt", "input", "question")
EXPECTED_COLUMNS = ("expected", "target")
ROW_FIELDS = ("check", "answer", "files", "checks")
"""Columns a row may carry as they are (``files`` and ``checks`` as JSON in a CSV)."""


def _rows(path: Path, text: str) -> list[dict[str, Any]]:
    """A dataset's rows: a JSON object per line (``.jsonl``), or a CSV with a header."""
    if path.suffix.lower() == ".csv":
        try:
            return list(csv.DictReader(io.StringIO(text)))
        except csv.Error as exc:
            raise SuiteError(f"{path}: not valid CSV: {exc}") from None
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise SuiteError(f"{path}: line {number} is not JSON: {exc}") from None
        if not isinstance(row, dict):
            raise SuiteError(f"{path}: line {number} is not a JSON object")
        rows.append(row)
    return rows


def _column(row: dict[str, Any], fields: dict[str, str], name: str, aliases: Sequence[str]) -> Any:
    if name in fields:
        return row.get(fields[name])
    return next((row[a] for a in aliases if row.get(a) not in (None, "")), None)


def dataset_tasks(
    path: Path, *, fields: dict[str, str] | None = None, prompt: str | None = None
) -> list[dict[str, Any]]:
    """One task per row of a JSONL or CSV dataset. ``fields`` maps a task key (``id``,
    ``prompt``, ``expected``, ``check``, ``answer``) to the column that holds it; by default
    the id is ``id`` (else ``row-N``), the prompt ``prompt``/``input``/``question``, and
    ``expected``/``target`` becomes a case-insensitive ``contains`` check (inspect-ai's
    ``includes``). ``prompt``: a template naming columns as ``{column}``. Other columns
    are only for the template."""
    fields = fields or {}
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read: {exc}") from None
    tasks: list[dict[str, Any]] = []
    for number, row in enumerate(_rows(path, text), start=1):
        where = f"{path}: row {number}"
        if prompt is not None:
            try:
                text_in = prompt.format_map({k: "" if v is None else v for k, v in row.items()})
            except (KeyError, IndexError, ValueError) as exc:
                raise SuiteError(f"{where}: the prompt template needs {exc}") from None
        else:
            text_in = _column(row, fields, "prompt", PROMPT_COLUMNS)
        task: dict[str, Any] = {
            "id": str(_column(row, fields, "id", ("id",)) or f"row-{number}"),
            "prompt": text_in if isinstance(text_in, str) else json.dumps(text_in),
        }
        for name in ROW_FIELDS:
            value = _column(row, fields, name, (name,))
            if isinstance(value, str) and name in ("files", "checks"):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise SuiteError(f"{where}: {name} is not JSON") from None
            if value not in (None, ""):
                task[name] = value
        expected = _column(row, fields, "expected", EXPECTED_COLUMNS)
        if expected not in (None, ""):
            check = {"type": "contains", "value": str(expected), "ignore_case": True}
            task["checks"] = [*task.get("checks", []), check]
        tasks.append(task)
    if not tasks:
        raise SuiteError(f"{path}: no rows")
    return tasks


class Dataset(BaseModel):
    """A suite's ``dataset:`` (rows read from a file beside the suite, one task each)."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1)
    fields: dict[str, str] = Field(default_factory=dict)
    prompt: str | None = None


def _with_dataset(data: Any, base: Path) -> Any:
    """The suite's data with its ``dataset``'s rows appended to its tasks."""
    if not isinstance(data, dict) or "dataset" not in data:
        return data
    try:
        dataset = Dataset.model_validate(data["dataset"])
    except ValidationError as exc:
        raise SuiteError(describe(exc).replace("suite", "dataset", 1)) from None
    rows = dataset_tasks(base / dataset.path, fields=dataset.fields, prompt=dataset.prompt)
    rest = {k: v for k, v in data.items() if k != "dataset"}
    return {**rest, "tasks": [*(rest.get("tasks") or []), *rows]}


def load_suite(path: str | Path) -> Suite:
    """Read a suite: a YAML file (with an optional ``dataset``), or a JSONL or CSV dataset
    alone (named after the file); :class:`SuiteError` for a file that is not one."""
    path = Path(path)
    if path.suffix.lower() in DATASET_SUFFIXES:
        try:
            return parse_suite({"name": path.stem or "dataset", "tasks": dataset_tasks(path)})
        except SuiteError as exc:
            raise SuiteError(f"{path}:\n{exc}") from None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"{path}: cannot read: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SuiteError(f"{path}: not valid YAML{where}: {problem}") from None
    try:
        return parse_suite(_with_dataset(data, path.parent))
    except SuiteError as exc:
        raise SuiteError(f"{path}:\n{exc}") from None


# -- records (the gateway stores them per API key: longhaul.core.evals) -------------------


class EvalRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An eval run as created: which suite, models and repeats it covers."""

    eval_id: str
    suite: dict[str, Any]
    models: list[str]
    repeat: int
    created_at: float
    replay_of: str | None = None
    """Set on a replay (``longhaul eval --replay``): each run answers the model calls of the
    same (task, model, repeat) of this earlier eval from its recorded trace."""
    notify: bool = False
    """Its runs send notifications (``--notify``); by default an eval's runs send none."""


class RunResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One (task, model, repeat) as scored; ``reasons`` says why it failed."""

    task: str
    model: str
    repeat: int
    trace_id: str
    status: str
    passed: bool
    tokens: int = 0
    cost: float = 0.0
    duration_s: float = 0.0
    model_calls: int = 0
    recovered: bool = False
    reasons: list[str] = msgspec.field(default_factory=list)
    diverged: str | None = None
    """On a replay: where the run first did something else than its record (``None``: it
    did the same)."""
    output: str | None = None
    """The run's final answer (its first :data:`MAX_OUTPUT_CHARS`)."""
    checks: list[CheckVerdict] = msgspec.field(default_factory=list)
    ended_at: float = 0.0
    """When the run's trace ended (Unix time)."""


class CheckOutcome(msgspec.Struct, kw_only=True):
    """What a task's ``check`` and library checks said of a run (the verifier writes it):
    ``passed`` and ``log`` are the command's, ``checks`` every library check's verdict."""

    trace_id: str
    passed: bool
    log: str = ""
    checks: list[CheckVerdict] = msgspec.field(default_factory=list)


def run_key(task: str, model: str, repeat: int) -> str:
    """A KV-safe name for one run (model strings hold ``:``, ``/`` and ``?``)."""
    digest = hashlib.sha256(f"{task}\0{model}\0{repeat}".encode()).hexdigest()[:24]
    return f"r{digest}"


# -- a result table ----------------------------------------------------------------------

Z_95 = 1.959963984540054


def wilson(passed: int, total: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate (sound at 0, at 1 and for few runs, where the
    normal approximation says 100 % ± 0)."""
    if total == 0:
        return 0.0, 1.0
    p = passed / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    spread = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return max(0.0, centre - spread), min(1.0, centre + spread)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1), interpolated between ranks; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(runs: Iterable[RunResult]) -> dict[str, dict[str, Any]]:
    """Per model: passed, total, pass_rate, ci_low, ci_high, tokens/cost/time/calls."""
    by_model: dict[str, list[RunResult]] = {}
    for run in runs:
        by_model.setdefault(run.model, []).append(run)
    summary: dict[str, dict[str, Any]] = {}
    for model, results in by_model.items():
        passed = sum(r.passed for r in results)
        total = len(results)
        low, high = wilson(passed, total)
        tokens = [float(r.tokens) for r in results]
        durations = [r.duration_s for r in results]
        calls = [float(r.model_calls) for r in results]
        summary[model] = {
            "passed": passed,
            "total": total,
            "pass_rate": passed / total,
            "ci_low": low,
            "ci_high": high,
            "tokens_median": percentile(tokens, 0.5),
            "tokens_p90": percentile(tokens, 0.9),
            "cost_total": sum(r.cost for r in results),
            "cost_median": percentile([r.cost for r in results], 0.5),
            "duration_median_s": percentile(durations, 0.5),
            "duration_p90_s": percentile(durations, 0.9),
            "model_calls_median": percentile(calls, 0.5),
            "model_calls_p90": percentile(calls, 0.9),
            "recovered": sum(r.recovered for r in results),
        }
    return summary


def regressions(
    current: dict[str, Any], baseline: dict[str, Any], *, spend: bool = True
) -> list[str]:
    """What got worse from ``baseline`` to ``current`` (both in the ``--json`` shape): a task
    that passed in every baseline repeat and now fails in one, a model whose pass rate fell
    below the baseline's interval, median tokens or total cost up more than 20 %.
    ``spend=False`` (a replay, whose model calls are played back and cost nothing) compares
    outcomes only."""
    found: list[str] = []
    always: dict[tuple[str, str], bool] = {}
    for run in baseline.get("runs", []):
        key = (run["task"], run["model"])
        always[key] = always.get(key, True) and bool(run["passed"])
    failed_now = sorted(
        {(run["task"], run["model"]) for run in current.get("runs", []) if not run["passed"]}
    )
    for task, model in failed_now:
        if always.get((task, model)):
            found.append(f"{model}: task {task} passed in every baseline repeat and now fails")
    before_all: dict[str, Any] = baseline.get("summary", {})
    for model, now in current.get("summary", {}).items():
        before = before_all.get(model)
        if before is None:
            continue
        if now["pass_rate"] < before["ci_low"]:
            found.append(
                f"{model}: pass rate {now['pass_rate']:.0%} below the baseline's interval "
                f"[{before['ci_low']:.0%}, {before['ci_high']:.0%}]"
            )
        for field, label in (("tokens_median", "median tokens"), ("cost_total", "cost")):
            if not spend:
                break
            old, new = float(before.get(field, 0)), float(now.get(field, 0))
            if old > 0 and new > old * (1 + REGRESSION_GROWTH):
                found.append(f"{model}: {label} up {new / old - 1:.0%} ({old:g} → {new:g})")
    return found
