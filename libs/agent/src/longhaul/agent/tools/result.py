"""What a tool hands back, and how a tool says "the answer comes later"."""

from __future__ import annotations

from dataclasses import dataclass

from longhaul.domain.events import DeadlineAction, WaitReason

CUT_OFF = "cut_off"
"""The error code of a result that tells the model its call was cut off by a crash."""


@dataclass(frozen=True, slots=True)
class Attachment:
    """A binary produced by a tool. It never rides inside an event (payloads stay small): the
    engine stores it in the workspace and the tool message carries a reference.

    ``show``: an image the model should see (``view_image``, a browser screenshot). A tool
    message cannot carry an image for every provider, so once the call group is answered the
    engine appends a synthetic user message with the image parts (by reference, see
    :mod:`longhaul.agent.images`).
    """

    name: str
    data: bytes
    media_type: str = "application/octet-stream"
    show: bool = False


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool answer.

    ``include_output_only_once``: the full ``output`` is sent to the model in the first request
    after the call; later requests carry ``long_term_memory`` instead (a short note such as
    "read 400 lines of app.py"), which keeps big outputs from being paid for on every step.
    ``error_code`` marks a failed call (``tool_call_invalid``, ``path_outside_workdir``…).
    """

    output: str
    title: str = ""
    long_term_memory: str | None = None
    include_output_only_once: bool = False
    attachments: tuple[Attachment, ...] = ()
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class Deferred:
    """The call's result arrives in a later turn (children finished, a human replied).

    The engine emits the events the call recorded, then ``Waiting(reason)`` once every call of
    the model turn ran, and ends the turn.
    """

    reason: WaitReason
    detail: str = ""
    deadline_s: float | None = None
    """Unanswered this long, ``on_deadline`` is taken (the earliest of a turn's deferrals)."""
    on_deadline: DeadlineAction = "deny"


ToolReply = ToolResult | Deferred
