"""What the gateway asks an executor when a bundle is imported (core NATS request on
``Names.imports``): append these traces' logs, each to a trace that does not exist yet.

The gateway checks the bundle, gives it fresh ids and the importer as owner
(``longhaul.domain.bundle``) and stores its files; the events go through an executor because
an imported log holds every kind of event (messages, verdicts, completions), which no other
service's NATS user may publish. The executor holds each new trace's lease while it writes,
so no wake-up runs a half-written trace, and appends from an empty position only: an import
can never add to a trace that exists.
"""

from __future__ import annotations

import msgspec

IMPORT_ACTOR = "import"
"""The actor of every imported event: services' consumers take such an event for no wake-up
(a half-written family must not be acted on); the importer wakes what is left to run."""


class _Actor(msgspec.Struct):
    actor: str = ""


def is_imported(payload: bytes) -> bool:
    """Whether a stored event was written by an import."""
    try:
        return msgspec.json.decode(payload, type=_Actor).actor == IMPORT_ACTOR
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


class ImportedTrace(msgspec.Struct, kw_only=True):
    trace_id: str
    events: list[msgspec.Raw]
    """Encoded events, in order; the first is the trace's creation."""


class ImportRequest(msgspec.Struct, kw_only=True):
    owner: str | None
    """The importer: every creation must name it."""
    traces: list[ImportedTrace]
    """Parents before children."""


class ImportReply(msgspec.Struct, kw_only=True, omit_defaults=True):
    error: str | None = None
    """Why nothing (or not everything) was written; None: all of it was."""
