"""Errors a tool raises on purpose: the message goes back to the model, the code to the log."""

from __future__ import annotations


class ToolError(Exception):
    """A tool refused or failed in a way the model can act on.

    ``code`` lands in ``MessageAppended.error_code`` so that callers (and tests) can tell a
    jail refusal from a timeout without parsing text.
    """

    def __init__(self, message: str, *, code: str = "tool_error") -> None:
        super().__init__(message)
        self.code = code


class TurnConfigError(ValueError):
    """The trace's configuration cannot run here (e.g. a working directory outside the root);
    the engine fails the trace with ``stop_reason="config_error"`` instead of crashing."""
