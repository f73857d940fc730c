"""Errors raised by the folds."""


class InvalidTransition(ValueError):
    """An event cannot apply to the current state (impossible status change, unknown sequence…).

    ``code`` is a stable machine-readable reason; the gateway maps it to 404/409/422.
    """

    def __init__(self, message: str, *, code: str = "invalid_transition") -> None:
        super().__init__(message)
        self.code = code
