"""Merge strategies for competitive phases: several step traces ran the same phase, one
result goes on.

- ``best``: a judge call (planner model) picks one candidate.
- ``vote``: each competitor's model scores the others' answers; the highest total wins.
- ``fusion``: a call merges all candidates into one result.
- ``first`` — and every strategy when no usable model exists or its calls fail — takes the
  first successful candidate in competitor order, so the outcome is deterministic offline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from longhaul.domain.events import MergeCandidate, MergeRecord, PhaseSpec
from longhaul.llm.structured import complete_json
from longhaul.llm.telemetry import traced_complete
from longhaul.llm.types import Model, ModelError, ModelRequest
from longhaul.planner.models import CALL_TIMEOUT_S, PlannerModels

log = logging.getLogger(__name__)

MAX_CANDIDATE_CHARS = 8000


@dataclass(frozen=True)
class Candidate:
    label: str
    trace_id: str
    output: str
    model: str | None = None


@dataclass(frozen=True)
class MergeResult:
    output: str
    trace_id: str | None
    """The chosen candidate's trace; ``None`` for a fusion of several."""
    note: str
    method: str = "first"
    """What decided: ``judge``, ``vote``, ``fusion`` or ``first``."""
    scores: dict[str, float] | None = None
    """Vote totals by candidate trace."""


def _shown(text: str) -> str:
    if len(text) <= MAX_CANDIDATE_CHARS:
        return text
    return text[:MAX_CANDIDATE_CHARS] + f"\n[... {len(text) - MAX_CANDIDATE_CHARS} chars cut]"


def _phase_text(spec: PhaseSpec) -> str:
    criteria = "".join(f"\n- {c}" for c in spec.criteria)
    return f"Phase {spec.id}: {spec.name}\n{spec.description}" + (
        f"\nAcceptance criteria:{criteria}" if criteria else ""
    )


def _numbered(candidates: list[Candidate], skip: int | None = None) -> str:
    return "\n\n".join(
        f'<candidate number="{n}">\n{_shown(c.output)}\n</candidate>'
        for n, c in enumerate(candidates, 1)
        if n - 1 != skip
    )


def merge_record(
    strategy: str, competitors: Sequence[tuple[str, str, str]], result: MergeResult
) -> MergeRecord:
    """The decision as it goes on the log: every competitor ``(label, trace_id, status)``,
    its score where there was a vote, the winner and why."""
    scores = result.scores or {}
    return MergeRecord(
        strategy=strategy,
        method=result.method,
        candidates=[
            MergeCandidate(
                label=label, trace_id=trace_id, status=status, score=scores.get(trace_id)
            )
            for label, trace_id, status in competitors
        ],
        winner=result.trace_id,
        reason=result.note,
    )


def first(candidates: list[Candidate], note: str) -> MergeResult:
    return MergeResult(candidates[0].output, candidates[0].trace_id, note)


async def merge(
    strategy: str, spec: PhaseSpec, candidates: list[Candidate], models: PlannerModels
) -> MergeResult:
    """One result from the successful ``candidates`` (in competitor order, at least one)."""
    if len(candidates) == 1:
        return first(candidates, "only one competitor succeeded")
    if strategy == "first":
        return first(candidates, "first successful competitor")
    try:
        if strategy == "vote":
            return await _vote(spec, candidates, models)
        judge = models.planner()
        if judge is None:
            return first(candidates, f"{strategy}: no model, first successful competitor")
        if strategy == "fusion":
            return await _fusion(spec, candidates, judge)
        return await _best(spec, candidates, judge)
    except (ModelError, TimeoutError) as exc:
        log.warning("merge %s of phase %s failed: %s", strategy, spec.id, exc)
        return first(candidates, f"{strategy} failed ({exc or 'timeout'}), first successful")


BEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["best", "reason"],
    "properties": {"best": {"type": "integer", "minimum": 1}, "reason": {"type": "string"}},
}


async def _best(spec: PhaseSpec, candidates: list[Candidate], judge: Model) -> MergeResult:
    schema = {
        **BEST_SCHEMA,
        "properties": {
            **BEST_SCHEMA["properties"],
            "best": {"type": "integer", "minimum": 1, "maximum": len(candidates)},
        },
    }
    prompt = (
        f"{_phase_text(spec)}\n\nSeveral agents did this phase. Pick the candidate that best "
        f"meets the phase and its criteria.\n\n{_numbered(candidates)}\n\n"
        'Answer {"best": <candidate number>, "reason": "..."}.'
    )
    value, _ = await complete_json(
        judge,
        [{"role": "user", "content": prompt}],
        schema,
        timeout_s=CALL_TIMEOUT_S,
        temperature=0,
    )
    chosen = candidates[value["best"] - 1]
    return MergeResult(
        chosen.output,
        chosen.trace_id,
        f"best: judge chose {chosen.label}: {value['reason']}",
        method="judge",
    )


def vote_schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["scores"],
        "properties": {
            "scores": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["candidate", "score"],
                    "properties": {
                        "candidate": {"type": "integer", "minimum": 1, "maximum": count},
                        "score": {"type": "number", "minimum": 0, "maximum": 10},
                    },
                },
            }
        },
    }


async def _ballot(
    spec: PhaseSpec, candidates: list[Candidate], voter: int, model: Model
) -> dict[int, float]:
    """Scores one competitor gives the others. Its own answer is in the conversation as its
    earlier turn, so it judges the others against what it did itself."""
    own = candidates[voter]
    conversation = [
        {"role": "user", "content": _phase_text(spec)},
        {"role": "assistant", "content": _shown(own.output)},
        {
            "role": "user",
            "content": (
                "Other agents did the same phase. Score each of their answers from 0 to 10 "
                f"against the phase and its criteria.\n\n{_numbered(candidates, skip=voter)}\n\n"
                'Answer {"scores": [{"candidate": <number>, "score": <0-10>}]}.'
            ),
        },
    ]
    value, _ = await complete_json(
        model, conversation, vote_schema(len(candidates)), timeout_s=CALL_TIMEOUT_S, temperature=0
    )
    return {
        item["candidate"] - 1: float(item["score"])
        for item in value["scores"]
        if item["candidate"] - 1 != voter
    }


async def _vote(spec: PhaseSpec, candidates: list[Candidate], models: PlannerModels) -> MergeResult:
    role_model = models.config.for_role("planner")
    voters = [(i, models.usable(c.model or role_model)) for i, c in enumerate(candidates)]
    ballots = await asyncio.gather(
        *(_ballot(spec, candidates, i, model) for i, model in voters if model is not None),
        return_exceptions=True,
    )
    totals = [0.0] * len(candidates)
    counted = 0
    for ballot in ballots:
        if isinstance(ballot, BaseException):
            if not isinstance(ballot, ModelError | TimeoutError):
                raise ballot
            log.warning("a vote on phase %s was lost: %s", spec.id, ballot)
            continue
        counted += 1
        for index, score in ballot.items():
            totals[index] += score
    if not counted:
        return first(candidates, "vote: no competitor could vote, first successful")
    winner = max(range(len(candidates)), key=lambda i: (totals[i], -i))
    tally = ", ".join(f"{c.label}={totals[i]:g}" for i, c in enumerate(candidates))
    chosen = candidates[winner]
    return MergeResult(
        chosen.output,
        chosen.trace_id,
        f"vote: {chosen.label} won ({tally}; {counted} ballots)",
        method="vote",
        scores={c.trace_id: totals[i] for i, c in enumerate(candidates)},
    )


async def _fusion(spec: PhaseSpec, candidates: list[Candidate], model: Model) -> MergeResult:
    prompt = (
        f"{_phase_text(spec)}\n\nSeveral agents did this phase. Merge their answers into one "
        "result that keeps the correct and valuable parts of each, resolves contradictions, "
        f"and meets the criteria. Answer with the merged result only.\n\n{_numbered(candidates)}"
    )
    request = ModelRequest(model=model.name, messages=[{"role": "user", "content": prompt}])
    response = await asyncio.wait_for(traced_complete(model, request), timeout=CALL_TIMEOUT_S)
    if not response.content.strip():
        return first(candidates, "fusion: empty merge, first successful")
    return MergeResult(
        response.content, None, f"fusion of {len(candidates)} candidates", method="fusion"
    )
