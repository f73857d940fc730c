"""LLM judge: the verifier role model scores the answer against each acceptance criterion with
a rubric. The answer passes when the judge says so *and* every criterion reaches the pass
score, so a lenient verdict cannot hide a criterion it scored low.

An offline model (``scripted:auto``, no script) cannot judge anything: the check is skipped
and says so in the log, rather than passing or failing on made-up output.
"""

from __future__ import annotations

from typing import Any

from longhaul.llm.structured import StructuredAnswerError, complete_json
from longhaul.llm.types import Model, ModelError
from longhaul.verifier.result import CheckResult
from longhaul.verifier.spec import JudgeCheck

MAX_ANSWER_CHARS = 30_000
DEFAULT_RUBRIC = (
    "10 = fully met, with evidence in the answer; 7 = met with minor gaps; "
    "4 = partially met; 0 = not addressed or wrong."
)
SYSTEM = (
    "You are a strict verifier. Judge only what the answer shows, never what it promises. "
    "Score every acceptance criterion from 0 to 10 with the rubric and give a short reason; "
    "then give the overall verdict and concrete feedback the author can act on."
)

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["criteria", "verdict", "feedback"],
    "properties": {
        "criteria": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["criterion", "score", "reason"],
                "properties": {
                    "criterion": {"type": "string"},
                    "score": {"type": "number", "minimum": 0, "maximum": 10},
                    "reason": {"type": "string"},
                },
            },
        },
        "verdict": {"enum": ["pass", "fail"]},
        "feedback": {"type": "string"},
    },
}


def is_offline(model_string: str) -> bool:
    """``scripted:auto`` answers with schema samples, not judgement."""
    return model_string.startswith("scripted:auto")


def judge_prompt(check: JudgeCheck, answer: str, task: str) -> str:
    shown = (
        answer
        if len(answer) <= MAX_ANSWER_CHARS
        else (answer[:MAX_ANSWER_CHARS] + f"\n[... {len(answer) - MAX_ANSWER_CHARS} chars cut]")
    )
    criteria = "\n".join(f"{n}. {c}" for n, c in enumerate(check.criteria, 1))
    return (
        (f"Task given to the author:\n{task}\n\n" if task else "")
        + f"Acceptance criteria:\n{criteria}\n\n"
        f"Rubric: {check.rubric or DEFAULT_RUBRIC}\n"
        f"A criterion is met at a score of {check.pass_score:g} or more.\n\n"
        f"Answer to judge:\n<answer>\n{shown}\n</answer>"
    )


async def run_judge(
    check: JudgeCheck, answer: str, *, model: Model, task: str = "", timeout_s: float = 120.0
) -> CheckResult:
    if is_offline(model.name):
        return CheckResult(
            "judge",
            passed=True,
            skipped=True,
            log=f"skipped: {model.name} is an offline model and cannot judge",
        )
    messages = [{"role": "user", "content": judge_prompt(check, answer, task)}]
    try:
        value, _ = await complete_json(
            model, messages, JUDGE_SCHEMA, system=SYSTEM, timeout_s=timeout_s, temperature=0
        )
    except (ModelError, TimeoutError) as exc:
        kind = "gave no valid verdict" if isinstance(exc, StructuredAnswerError) else "failed"
        message = f"judge {model.name} {kind}: {exc or 'timeout'}"
        return CheckResult("judge", passed=False, errors=[message], log=message)
    return _score(check, value)


def _score(check: JudgeCheck, value: dict[str, Any]) -> CheckResult:
    scored = value["criteria"]
    errors: list[str] = []
    lines: list[str] = []
    for index, criterion in enumerate(check.criteria):
        if index >= len(scored):
            errors.append(f"criterion not assessed: {criterion}")
            continue
        item = scored[index]
        lines.append(f"[{item['score']:g}/10] {criterion}: {item['reason']}")
        if item["score"] < check.pass_score:
            errors.append(f"{criterion} (score {item['score']:g}): {item['reason']}")
    if value["verdict"] != "pass" and not errors:
        errors.append(f"judge verdict: fail. {value['feedback']}".strip())
    lines.append(f"verdict: {value['verdict']}. feedback: {value['feedback']}")
    return CheckResult("judge", passed=not errors, errors=errors, log="\n".join(lines))
