"""The outcome of one verification check, and of all checks of a request together."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CheckResult:
    """``skipped`` checks (e.g. an LLM judge with no usable model) neither pass nor fail."""

    name: str
    passed: bool
    errors: list[str] = field(default_factory=list)
    log: str = ""
    skipped: bool = False


@dataclass(frozen=True)
class Verdict:
    passed: bool
    errors: list[str]
    log: str


def _outcome(result: CheckResult) -> str:
    if result.skipped:
        return "skipped"
    return "passed" if result.passed else "failed"


def combine(results: list[CheckResult]) -> Verdict:
    """All non-skipped checks must pass; the log has one section per check."""
    errors = [f"{r.name}: {e}" for r in results if not r.skipped and not r.passed for e in r.errors]
    failed = [r for r in results if not r.skipped and not r.passed]
    sections = [f"== {r.name}: {_outcome(r)}\n{r.log}".rstrip() for r in results]
    if not results:
        sections = ["no verification checks configured"]
    for r in failed:
        if not r.errors:
            errors.append(f"{r.name}: failed")
    return Verdict(passed=not failed, errors=errors, log="\n".join(sections))
