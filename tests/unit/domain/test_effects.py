"""The effect ledger (``longhaul.domain.state.effects``): which calls may start acting, which
are unsettled, and how a call cut off by a crash is resumed and decided."""

from __future__ import annotations

import pytest
from longhaul.domain import events as ev
from longhaul.domain.messages import ToolCall
from longhaul.domain.state.effects import Ledger
from longhaul.domain.state.errors import InvalidTransition


def started(call: str) -> ev.EffectStarted:
    return ev.EffectStarted(tool_call_id=call, tool="pay", idempotency_key="k", effects="unsafe")


def decided(call: str, **more: object) -> ev.ToolDecided:
    return ev.ToolDecided(tool_call_id=call, **more)  # type: ignore[arg-type]


WAITING = [ToolCall.of(id=i, name="pay", arguments="{}") for i in ("c_1", "c_2")]


def test_only_a_waiting_call_starts_acting_and_a_started_one_is_unsettled() -> None:
    ledger = Ledger()
    with pytest.raises(InvalidTransition, match="c_9 of trace t_1 is not waiting"):
        ledger.check_started("t_1", started("c_9"), WAITING)
    ledger.check_started("t_1", started("c_1"), WAITING)
    ledger.start(started("c_1"))
    assert [c.id for c in ledger.unsettled(WAITING)] == ["c_1"]
    assert ledger.unsettled(WAITING[1:]) == []  # answered calls are not passed in


def test_a_cut_off_call_is_decided_and_a_run_again_uses_the_decision_up() -> None:
    ledger = Ledger()
    ledger.start(started("c_1"))
    with pytest.raises(InvalidTransition, match="not a call whose outcome is unknown"):
        ledger.check_decided("t_1", decided("c_1", approved=False, took_effect=True))
    ledger.check_resumed("t_1", ev.EffectResumed(tool_call_id="c_1", resolution="asked"))
    ledger.resume(ev.EffectResumed(tool_call_id="c_1", resolution="asked"))
    ledger.check_decided("t_1", decided("c_1", approved=False, took_effect=True))
    with pytest.raises(InvalidTransition, match="send approved false"):
        ledger.check_decided("t_1", decided("c_1", approved=True, took_effect=True))
    with pytest.raises(InvalidTransition, match="never with edited arguments"):
        ledger.check_decided("t_1", decided("c_1", approved=True, arguments={"x": 2}))
    ledger.decide(decided("c_1", approved=True))
    effect = ledger.get("c_1")
    assert effect is not None and effect.decision is not None
    ledger.resume(ev.EffectResumed(tool_call_id="c_1", resolution="run_again"))
    assert effect.decision is None and len(effect.resumed) == 2


def test_a_call_that_never_started_cannot_be_resumed() -> None:
    with pytest.raises(InvalidTransition, match="never started an effect"):
        Ledger().check_resumed("t_1", ev.EffectResumed(tool_call_id="c_1", resolution="rerun"))
