"""A run's verification (``longhaul.domain.state.verification``)."""

from __future__ import annotations

from longhaul.domain import events as ev
from longhaul.domain.state.verification import VerificationState


def test_attempts_failures_and_the_failure_the_model_has_not_seen() -> None:
    checks = VerificationState()
    checks.request(ev.VerificationRequested(attempt=1, answer_sequence=4, answer="done"))
    assert (checks.attempts, checks.pending) == (1, True)
    failure = ev.VerificationFailed(attempt=1, errors=["no tests"])
    checks.fail(failure)
    assert not checks.pending and checks.failures == [failure] and checks.unconsumed_failure
    checks.on_user_message()
    assert not checks.unconsumed_failure
    checks.request(ev.VerificationRequested(attempt=2, answer_sequence=6, answer="done"))
    checks.succeed()
    assert (checks.attempts, checks.pending, checks.passed) == (2, False, True)
    assert checks.failures == [failure]
