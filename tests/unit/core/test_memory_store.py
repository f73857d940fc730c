"""What only the in-memory store does: simulated races. The rules it shares with the JetStream
store are checked over both in ``tests/integration/core/test_recorders.py``."""

from __future__ import annotations

import pytest
from longhaul.core.memory import MemoryStore
from longhaul.core.store import ConcurrencyError, Position
from longhaul.domain import events as ev

from tests.support.folds import trace_state

CREATED = ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")])


def message(sequence: int, text: str) -> ev.MessageAppended:
    return ev.MessageAppended(
        sequence=sequence, parent_sequence=sequence - 1, role="assistant", content=text
    )


async def test_interleaved_writes_land_first_and_make_the_next_append_conflict() -> None:
    store = MemoryStore()
    [a] = await store.append("trace", "t_1", [CREATED], expected=Position())
    store.interleave("trace", "t_1", ev.StopRequested(reason="user"))
    with pytest.raises(ConcurrencyError):
        await store.append("trace", "t_1", [message(2, "late")], expected=Position(a.seq, 1))
    state = await trace_state(store, "t_1")
    assert state.stop_requested and state.version == 2
