"""Stop requests heard while a turn runs, so that the model call in flight is cut short.

A stop request is an event in the trace's log. The wake-up consumer hands it to *one*
replica, maybe not the one whose turn runs the trace, and that turn would only see it in
the log once its model call returned (minutes, for a rambling model). So every replica also
listens to the ``stop_requested`` subjects on core NATS (one wildcard subscription per
replica; a JetStream publish is an ordinary NATS message to any subscriber) and sets the
stop signal of its running turn of that trace (``longhaul.agent.engine.interrupt``).

A heard message is a hint, never the truth: the engine cuts the model call and ends the
turn, and the runner re-reads the log, which decides (a stop request there is recorded as
``Stopped``; a forged or refused publish just starts a fresh turn). A turn registers before
it loads the trace, so a stop is either in what it loaded or heard while it runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from longhaul.agent.contract import StopSignal
from longhaul.domain.names import Names
from nats.aio.msg import Msg


class StopSignals:
    """The stop signals of this replica's running turns, by trace id."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self._running: dict[str, StopSignal] = {}

    @property
    def subject(self) -> str:
        """Every trace's ``stop_requested`` events in this namespace."""
        return self.names.type_filter("trace", "stop_requested")

    @contextlib.contextmanager
    def watch(self, trace_id: str) -> Iterator[StopSignal]:
        """The signal a stop request for ``trace_id`` sets while the block runs."""
        signal = StopSignal()
        self._running[trace_id] = signal
        try:
            yield signal
        finally:
            if self._running.get(trace_id) is signal:
                del self._running[trace_id]

    async def on_message(self, msg: Msg) -> None:
        aggregate, trace_id, _ = self.names.parse_subject(msg.subject)
        signal = self._running.get(trace_id) if aggregate == "trace" else None
        if signal is not None:
            signal.set()
