"""``Fold``: what every aggregate's state offers the write path.

The repository (``longhaul.core.repository``) loads a fold, asks it whether an event may
apply (:meth:`Fold.check`, which never changes the state), appends the event at the fold's
position (``stream_seq``) and applies it. :class:`~longhaul.domain.state.TraceState` and
:class:`~longhaul.domain.state.TaskState` both implement it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import msgspec
from longhaul.domain import events as ev
from longhaul.domain.state.faults import MAX_FAULTS, Fault, Unreadable, fault_of, next_version


@runtime_checkable
class Fold(Protocol):
    """A pure, snapshot-serialisable fold of one aggregate's events."""

    SCHEMA: ClassVar[int]
    """The fold's shape, raised when its fields move: a snapshot taken in another shape is
    not read (a full replay instead), never decoded into the wrong fields."""
    UPGRADES: ClassVar[Mapping[int, Callable[[dict[str, Any]], dict[str, Any]]]]
    """Shape ``n`` → ``n + 1`` over a snapshot decoded without a type: an older snapshot is
    upgraded step by step (:func:`decode_snapshot`) instead of replayed."""

    version: int
    """``n`` of the last applied event (0 for an aggregate that does not exist yet)."""
    stream_seq: int
    """Stream sequence of the last applied event: the optimistic-concurrency token."""
    faults: list[Fault]
    """Events of the log the fold skipped (``faults``)."""

    @property
    def exists(self) -> bool: ...

    @property
    def is_final(self) -> bool: ...

    def apply(self, event: ev.Event, stream_seq: int = 0) -> None:
        """Apply one event; raises :class:`InvalidTransition` if it cannot happen."""
        ...

    def check(self, event: ev.Event) -> None:
        """Raise :class:`InvalidTransition` if ``event`` could not apply; changes nothing."""
        ...


S = TypeVar("S", bound=Fold)


def decode_snapshot(fold: type[S], data: bytes, schema: int) -> S | None:
    """The fold a snapshot taken in shape ``schema`` holds: decoded as it is when it has the
    fold's shape, upgraded when the fold knows every step from it, else ``None`` (the log is
    replayed). A payload that does not have the shape it claims is ``None`` too; one that
    does not decode raises ``msgspec``'s errors, as a snapshot of the current shape would.
    The collector is paused meanwhile (:func:`_no_collection`)."""
    with _no_collection():
        return _decode(fold, data, schema)


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """Pause the cyclic collector: a snapshot decode builds objects (messages, their calls and
    parts) and frees none, so the collections it triggers only scan what it just built, over
    and over — two thirds of the decode's CPU at 20,000 messages, and the share grows with
    the state (issue 46). Reference counting still frees as usual."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _decode(fold: type[S], data: bytes, schema: int) -> S | None:
    if schema == fold.SCHEMA:
        return msgspec.msgpack.decode(data, type=fold)
    if schema > fold.SCHEMA or any(n not in fold.UPGRADES for n in range(schema, fold.SCHEMA)):
        return None
    raw = msgspec.msgpack.decode(data)
    try:
        for n in range(schema, fold.SCHEMA):
            raw = fold.UPGRADES[n](raw)
    except (KeyError, TypeError, AttributeError):
        return None
    return msgspec.msgpack.decode(msgspec.msgpack.encode(raw), type=fold)


def apply_or_skip(state: Fold, item: ev.Event | Unreadable, stream_seq: int = 0) -> Fault | None:
    """What every reader of a stored log does with each item: apply it, or, when it does not
    decode or cannot apply, record it as a fault and go on (returned, for metrics and logs).
    Writers use :meth:`Fold.check` and :meth:`Fold.apply` and never write what fails."""
    if not isinstance(item, Unreadable):
        try:
            state.apply(item, stream_seq)
            return None
        except Exception as exc:
            fault = fault_of(item, exc, stream_seq)
    else:
        fault = fault_of(item, None, stream_seq)
    state.faults = [*state.faults, fault][-MAX_FAULTS:]
    state.version = next_version(state.version, fault)
    if fault.stream_seq:
        state.stream_seq = fault.stream_seq
    return fault
