"""The event catalog: round trips and one typed error for anything malformed."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev


def test_every_event_type_round_trips() -> None:
    samples: list[ev.Event] = [
        ev.TraceCreated(messages=[ev.InputMessage(role="user", content="hi")]),
        ev.MessageAppended(
            sequence=2,
            parent_sequence=1,
            role="assistant",
            tool_calls=[ev.ToolCall.of(id="c", name="read")],
        ),
        ev.Compacted(summary_sequence=9, range=(2, 8)),
        ev.PlanCreated(phases=[ev.PhaseSpec(id="a", name="A")]),
    ]
    for event in samples:
        assert ev.decode(ev.encode(event)) == event
    assert ev.TRACE_EVENT_TYPES.isdisjoint(ev.TASK_EVENT_TYPES)
    assert {"trace_created", "run_requested", "task_created", "replanned"} <= set(ev.EVENT_TYPES)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"[]",
        b'{"type": "no_such_event"}',
        b'{"type": "message_appended", "sequence": "two", "parent_sequence": 1, "role": "user"}',
        b'{"type": "trace_created"}',
        b'{"type": "message_appended", "sequence": 2, "parent_sequence": 1, "role": "robot"}',
        b"\xff\xfe",
    ],
)
def test_malformed_payloads_raise_one_typed_error(payload: bytes) -> None:
    with pytest.raises(ev.EventDecodeError):
        ev.decode(payload)


def test_every_event_class_can_be_decoded() -> None:
    """A new event missing from the decoder's union would make every log holding it
    unreadable."""
    concrete = {
        cls
        for cls in vars(ev).values()
        if isinstance(cls, type)
        and issubclass(cls, (ev.TraceEvent, ev.TaskEvent, ev.ScheduleEvent))
        and cls not in (ev.TraceEvent, ev.TaskEvent, ev.ScheduleEvent)
    }
    assert concrete == set(ev.EVENT_TYPES.values())
