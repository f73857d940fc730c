"""The pure trace fold: message tree, main path, safe cuts, goals, counters, transitions."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from longhaul.domain import events as ev
from longhaul.domain.state import InvalidTransition, TraceState


def call(call_id: str, name: str = "read") -> ev.ToolCall:
    return ev.ToolCall.of(id=call_id, name=name, arguments="{}")


class Builder:
    """Appends messages the way the engine does, to keep the tests short."""

    def __init__(self, text: str = "task") -> None:
        self.state = TraceState()
        self.apply(
            ev.TraceCreated(
                aggregate_id="t_1", messages=[ev.InputMessage(role="user", content=text)]
            )
        )

    def apply(self, event: ev.Event) -> TraceState:
        self.state.apply(event)
        return self.state

    def message(self, role: str, content: str = "", **fields: object) -> int:
        seq = self.state.last_sequence + 1
        self.apply(
            ev.MessageAppended(
                sequence=seq,
                parent_sequence=fields.pop("parent", self.state.head_sequence or None),  # type: ignore[arg-type]
                role=role,  # type: ignore[arg-type]
                content=content,
                **fields,  # type: ignore[arg-type]
            )
        )
        return seq

    def tool_round(self, *call_ids: str) -> tuple[int, list[int]]:
        assistant = self.message("assistant", tool_calls=[call(c) for c in call_ids])
        results = [self.message("tool", f"result {c}", tool_call_id=c) for c in call_ids]
        return assistant, results


def test_main_path_follows_head() -> None:
    b = Builder()
    b.tool_round("a", "b")
    final = b.message("assistant", "answer")
    assert b.state.head_sequence == final
    assert [m.sequence for m in b.state.main_path()] == [1, 2, 3, 4, 5]
    assert [m.role for m in b.state.main_path()] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_rewind_moves_head_and_old_branch_falls_off() -> None:
    b = Builder()
    b.message("assistant", "first answer")
    b.apply(ev.Completed(summary="first answer"))
    b.apply(
        ev.RunRequested(after_sequence=1, messages=[ev.InputMessage(role="user", content="again")])
    )
    assert b.state.status == "running"
    assert [m.content for m in b.state.main_path()] == ["task", "again"]
    assert [m.sequence for m in b.state.all_messages()] == [1, 2, 3]
    assert b.state.messages[3].parent_sequence == 1


def test_safe_cut_never_separates_tool_calls_from_results() -> None:
    b = Builder()
    assistant, results = b.tool_round("a", "b", "c")
    b.message("assistant", "done")
    assert b.state.safe_cut(assistant) == results[-1]
    assert b.state.safe_cut(results[0]) == results[-1]
    assert b.state.safe_cut(results[-1]) == results[-1]
    assert b.state.safe_cut(1) == 1


def test_cut_that_does_not_exist_is_refused() -> None:
    b = Builder()
    b.apply(ev.Completed())
    with pytest.raises(InvalidTransition) as info:
        b.apply(ev.RunRequested(after_sequence=99))
    assert info.value.code == "unknown_sequence"


def test_reflection_branch_stays_off_the_main_path() -> None:
    b = Builder()
    head = b.message("assistant", "answer")
    side = b.message("assistant", "what went wrong", branch_type="reflection", parent=head)
    assert b.state.head_sequence == head
    assert side not in b.state.path
    assert side in {m.sequence for m in b.state.all_messages()}


def test_compression_summary_skips_the_covered_range() -> None:
    b = Builder()
    for i in range(4):
        b.message("assistant" if i % 2 == 0 else "user", f"m{i}")
    summary = b.message("user", "summary of 2-4", branch_type="compression", parent=1)
    b.message("assistant", "continuing")
    assert [m.sequence for m in b.state.main_path()] == [1, summary, summary + 1]


def test_goal_tree_rebuilt_as_of_the_cut() -> None:
    b = Builder()
    b.apply(ev.GoalChanged(op="add", goal=ev.Goal(id="g1", title="research")))
    b.apply(ev.GoalChanged(op="focus", goal=ev.Goal(id="g1", title="")))
    cut = b.message("assistant", "working on g1")
    b.apply(ev.GoalChanged(op="add", goal=ev.Goal(id="g2", title="write")))
    b.apply(ev.GoalChanged(op="done", goal=ev.Goal(id="g1", title="", summary="found")))
    b.message("assistant", "later")
    b.apply(ev.Completed())
    assert set(b.state.goals.goals) == {"root", "g1", "g2"}
    b.apply(ev.RunRequested(after_sequence=1))
    # g1 created before the cut survives, reset from in-progress to pending; g2 is dropped;
    # the automatic root goal is in focus again.
    assert set(b.state.goals.goals) == {"root", "g1"}
    assert b.state.goals.goals["g1"].status == "pending"
    assert b.state.goals.focus == "root"
    assert cut not in b.state.path


def test_counters_accumulate_usage_cost_and_duration() -> None:
    b = Builder()
    usage = ev.Usage(prompt_tokens=100, completion_tokens=20, cache_read_tokens=50)
    b.message("assistant", "a", usage=usage, cost=0.01, duration_ms=300)
    b.message("user", "more")
    b.message("assistant", "b", usage=usage, cost=0.02, duration_ms=200)
    totals = b.state.totals
    assert (totals.prompt_tokens, totals.completion_tokens, totals.cache_read_tokens) == (
        200,
        40,
        100,
    )
    assert totals.cost == pytest.approx(0.03)
    assert totals.duration_ms == 500


@pytest.mark.parametrize(
    ("event", "code"),
    [
        (ev.HumanReplied(content="hi"), "conflict"),
        (ev.VerificationPassed(attempt=1), "conflict"),
        (ev.TraceCreated(messages=[]), "conflict"),
    ],
)
def test_impossible_transitions_are_rejected(event: ev.Event, code: str) -> None:
    b = Builder()
    with pytest.raises(InvalidTransition) as info:
        b.apply(event)
    assert info.value.code == code


def test_completed_trace_cannot_append_or_stop() -> None:
    b = Builder()
    b.message("assistant", "done")
    b.apply(ev.Completed())
    with pytest.raises(InvalidTransition):
        b.message("assistant", "more")
    with pytest.raises(InvalidTransition):
        b.apply(ev.StopRequested())


def test_events_on_unknown_trace_are_not_found() -> None:
    with pytest.raises(InvalidTransition) as info:
        TraceState().apply(ev.StopRequested(aggregate_id="t_x"))
    assert info.value.code == "not_found"


def test_human_wait_round_trip() -> None:
    b = Builder()
    b.message("assistant", tool_calls=[call("h1", "ask_human")])
    b.apply(ev.Waiting(reason="human", detail="which file?", tool_call_id="h1"))
    assert b.state.status == "waiting"
    b.apply(ev.HumanReplied(content="main.py"))
    assert b.state.status == "running" and b.state.human_reply == "main.py"
    b.message("tool", "main.py", tool_call_id="h1")
    assert b.state.human_reply is None and b.state.wait_tool_call_id is None


def test_verification_cycle() -> None:
    b = Builder()
    answer = b.message("assistant", "42")
    b.apply(ev.VerificationRequested(attempt=1, answer_sequence=answer))
    assert b.state.status == "waiting" and b.state.wait_reason == "verification"
    b.apply(ev.VerificationFailed(attempt=1, errors=["wrong"], log="expected 43"))
    assert b.state.status == "running" and b.state.verification.unconsumed_failure
    b.message("user", "verification failed: wrong")
    assert not b.state.verification.unconsumed_failure


def test_subtraces_wake_parent_when_all_finished() -> None:
    b = Builder()
    b.message("assistant", tool_calls=[call("a1", "agent")])
    for child in ("c1", "c2"):
        b.apply(ev.SubtraceSpawned(child_trace_id=child, tool_call_id="a1"))
    b.apply(ev.Waiting(reason="subtraces"))
    b.apply(ev.SubtraceFinished(child_trace_id="c1", status="completed", summary="x"))
    assert b.state.status == "waiting"
    b.apply(ev.SubtraceFinished(child_trace_id="c2", status="failed", summary="y"))
    assert b.state.status == "running"


def test_check_does_not_mutate() -> None:
    b = Builder()
    b.message("assistant", "done")
    before = b.state.version
    b.state.check(ev.Completed())
    assert b.state.status == "running" and b.state.version == before


@pytest.mark.parametrize(
    ("sequence", "parent", "code"),
    [(3, 1, "sequence_gap"), (2, 9, "unknown_sequence")],
)
def test_check_message_refuses_what_the_fold_refuses(sequence: int, parent: int, code: str) -> None:
    b = Builder()
    event = ev.MessageAppended(sequence=sequence, parent_sequence=parent, role="assistant")
    for check in (b.state.check_message, b.state.apply):
        with pytest.raises(InvalidTransition) as info:
            check(event)
        assert info.value.code == code
    assert b.state.last_sequence == 1 and b.state.version == 1
    b.state.check_message(ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant"))
    b.apply(ev.Completed())
    with pytest.raises(InvalidTransition) as info:
        b.state.check_message(ev.MessageAppended(sequence=2, parent_sequence=1, role="tool"))
    assert info.value.code == "conflict"


# ---------------------------------------------------------------- property: paired tool calls

Action = st.one_of(
    st.tuples(st.just("round"), st.integers(min_value=1, max_value=3)),
    st.tuples(st.just("partial"), st.integers(min_value=2, max_value=3)),
    st.tuples(st.just("text"), st.integers(min_value=0, max_value=0)),
    st.tuples(st.just("rewind"), st.integers(min_value=1, max_value=200)),
)


def assert_paired(state: TraceState) -> None:
    """On the main path every assistant tool_calls message is followed directly by results
    for all of its calls (or they are still the trailing, unanswered head group)."""
    path = state.main_path()
    for index, message in enumerate(path):
        if message.role != "assistant" or not message.tool_calls:
            continue
        wanted = {c.id for c in message.tool_calls}
        following = []
        for nxt in path[index + 1 :]:
            if nxt.role != "tool":
                break
            following.append(nxt.tool_call_id)
        answered = set(following)
        assert answered <= wanted
        at_end = index + 1 + len(following) == len(path)
        assert answered == wanted or at_end, (message.sequence, wanted, answered)


@settings(max_examples=150, deadline=None)
@given(st.lists(Action, max_size=25))
def test_any_appends_and_rewinds_keep_tool_calls_paired(actions: list[tuple[str, int]]) -> None:
    b = Builder()
    counter = 0
    for kind, arg in actions:
        if b.state.unanswered_tool_calls():
            # the engine (DanglingToolCall) always answers a dangling group before moving on
            for pending in b.state.unanswered_tool_calls():
                b.message(
                    "tool", "interrupted, call again", tool_call_id=pending.id, synthetic=True
                )
        if kind == "round":
            ids = [f"c{counter + i}" for i in range(arg)]
            counter += arg
            b.tool_round(*ids)
        elif kind == "partial":
            ids = [f"c{counter + i}" for i in range(arg)]
            counter += arg
            b.message("assistant", tool_calls=[call(c) for c in ids])
            b.message("tool", "only first", tool_call_id=ids[0])
        elif kind == "text":
            b.message("assistant", "thinking")
        else:
            target = 1 + (arg - 1) % b.state.last_sequence
            b.apply(ev.Completed()) if b.state.status == "running" else None
            b.apply(ev.RunRequested(after_sequence=target))
        assert_paired(b.state)


def carrier(span: str) -> dict[str, str]:
    return {"traceparent": f"00-4bf92f3577b34da6a3ce929d0e0e4736-{span}-01"}


def test_the_run_s_trace_context_is_that_of_the_event_that_started_the_run() -> None:
    """What every turn of a run continues (OpenTelemetry): the request that created or
    continued the trace, never an event written during the run; a spawn keeps its tool
    call's, and the fold survives a snapshot round trip with it."""
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id="t_1",
            messages=[ev.InputMessage(role="user", content="go")],
            trace_context=carrier("00000000000000a1"),
        )
    )
    assert state.run_trace_context == carrier("00000000000000a1")
    state.apply(
        ev.MessageAppended(
            sequence=2,
            parent_sequence=1,
            role="assistant",
            trace_context=carrier("00000000000000b2"),
        )
    )
    state.apply(
        ev.SubtraceSpawned(
            child_trace_id="t_2", tool_call_id="c1", trace_context=carrier("00000000000000c3")
        )
    )
    state.apply(ev.ReflectRequested(trace_context=carrier("00000000000000d4")))  # while running
    assert state.run_trace_context == carrier("00000000000000a1")
    assert state.subtraces["t_2"].trace_context == carrier("00000000000000c3")
    state.apply(ev.Completed(summary="done"))
    state.apply(
        ev.RunRequested(
            messages=[ev.InputMessage(role="user", content="more")],
            trace_context=carrier("00000000000000e5"),
        )
    )
    assert state.run_trace_context == carrier("00000000000000e5")
    state.apply(ev.Completed(summary="done again"))
    state.apply(ev.CompactRequested(trace_context=carrier("00000000000000f6")))  # restarts it
    assert state.status == "running" and state.run_trace_context == carrier("00000000000000f6")
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(state), type=TraceState)
    assert again.run_trace_context == state.run_trace_context
    assert again.subtraces["t_2"].trace_context == carrier("00000000000000c3")


def test_the_fold_counts_messages_that_carry_images() -> None:
    b = Builder()
    b.message("assistant", "plain text")
    b.message("user", [{"type": "text", "text": "see"}])  # type: ignore[arg-type]
    assert b.state.image_messages == 0
    picture = {"type": "image_url", "image_url": {"url": "longhaul-image:abc"}}
    b.message("user", [{"type": "text", "text": "this"}, picture])  # type: ignore[arg-type]
    assert b.state.image_messages == 1


def test_a_goal_dropped_by_a_rewind_leaves_its_cost_to_its_kept_ancestor() -> None:
    """What a dropped goal spent stays in the tree (under its nearest kept ancestor, here the
    root goal), never on a new goal that gets its id after the rewind."""
    b = Builder()
    b.message("assistant", "a plan")
    b.apply(ev.GoalChanged(op="add", goal=ev.Goal(id="g1", title="research", parent_id="root")))
    b.apply(ev.GoalChanged(op="focus", goal=ev.Goal(id="g1", title="")))
    b.message("assistant", "read a lot", goal_id="g1", cost=2.0)
    b.apply(ev.Completed())
    b.apply(ev.RunRequested(after_sequence=1))
    b.apply(ev.GoalChanged(op="add", goal=ev.Goal(id="g1", title="write", parent_id="root")))
    stats = b.state.goals.stats
    assert "g1" not in stats and stats["root"].cost == 2.0
    assert b.state.goals.cumulative()["root"].cost == 2.0


def test_a_rewind_forgets_the_settled_effects_of_the_branch_it_leaves() -> None:
    """A call made again after a rewind under an id the abandoned branch used (a scripted
    model's ids are the conversation's hash) is a new call, not one cut off by a crash."""
    b = Builder()
    b.message("assistant", tool_calls=[call("c_w", "write")])
    b.apply(
        ev.EffectStarted(tool_call_id="c_w", tool="write", idempotency_key="k", effects="unsafe")
    )
    b.message("tool", "wrote it", tool_call_id="c_w")
    b.apply(ev.Completed())
    b.apply(ev.RunRequested(after_sequence=1))
    b.message("assistant", tool_calls=[call("c_w", "write")])
    assert b.state.unsettled_effects() == []
    assert b.state.ledger.get("c_w") is None
