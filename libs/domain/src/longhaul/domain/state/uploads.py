"""Files uploaded for a trace's next turn, a fold of its own: uploaded (``file_uploaded``, the
latest per name) and not yet written into the working directory (``files_delivered``)."""

from __future__ import annotations

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state.errors import InvalidTransition

MAX_PENDING_UPLOADS = 50
"""Files a trace may hold for its next turn (more is a 409: let it run first)."""


class Uploads(msgspec.Struct, kw_only=True):
    pending: list[ev.FileUploaded] = msgspec.field(default_factory=list)

    def check(self, trace_id: str) -> None:
        if len(self.pending) >= MAX_PENDING_UPLOADS:
            raise InvalidTransition(
                f"trace {trace_id} already has {MAX_PENDING_UPLOADS} files waiting for "
                "its next turn",
                code="conflict",
            )

    def add(self, event: ev.FileUploaded) -> None:
        """A file uploaded again under its name replaces the earlier one."""
        self.pending = [*(u for u in self.pending if u.name != event.name), event]

    def delivered(self, names: list[str]) -> None:
        done = set(names)
        self.pending = [u for u in self.pending if u.name not in done]
