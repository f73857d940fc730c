"""A run's verification, a fold of its own: the attempts of the verifier on the run's answer,
their failures, and whether the engine still has to show the last failure to the model.

While an attempt is pending the trace waits (``verification``); ``TraceState`` owns that
status and hands each verification event here.
"""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev


class VerificationState(msgspec.Struct, kw_only=True):
    attempts: int = 0
    pending: bool = False
    passed: bool = False
    failures: list[ev.VerificationFailed] = msgspec.field(default_factory=list)
    unconsumed_failure: bool = False
    """A failure the engine has not yet turned into a user message."""

    def request(self, event: ev.VerificationRequested) -> None:
        self.attempts = event.attempt
        self.pending = True

    def succeed(self) -> None:
        self.pending = False
        self.passed = True

    def fail(self, event: ev.VerificationFailed) -> None:
        self.pending = False
        self.failures.append(event)
        self.unconsumed_failure = True

    def on_user_message(self) -> None:
        """The engine showed the failure to the model (as a user message)."""
        self.unconsumed_failure = False
