"""``kill -9`` of an executor process while a tool call is in flight, against FakeOpenAI.

The fake answers 400 exactly like the real API when an assistant ``tool_calls`` message is not
followed by a tool message for each call, so the healed conversation the survivor sends is
checked on the wire. The slow tool is the real ``bash`` built-in, parked on FIFOs the test
controls (no timing): it announces itself on ``started.fifo`` and then waits on
``release.fifo``. ``bash`` is ``unsafe``: the effect ledger never runs it again blindly; its
effects stay in the trace's sandbox, so the survivor tells the model it was cut off (outcome
unknown, no output kept) and no person is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from longhaul.agent.workdir import UNOWNED_DIR
from longhaul.core.store import EventStore
from longhaul.domain import events as ev
from longhaul.domain.ids import new_id

from tests.support.folds import trace_state
from tests.support.llm_fakes import Call, FakeOpenAI, Reply
from tests.support.stack import ExecutorProcess, create_trace, wait_for_trace

WITHIN_S = 30.0
PARK = (
    "echo run >> runs.log; echo started > started.fifo; "
    "timeout 60 cat release.fifo"  # the timeout only bounds an orphan if cleanup failed
)


def pairing_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Every assistant tool call answered by a tool message before the next non-tool message
    (and no tool message without its call)."""
    problems: list[str] = []
    pending: list[str] = []
    for position, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            if message.get("tool_call_id") in pending:
                pending.remove(message["tool_call_id"])
            else:
                problems.append(
                    f"[{position}] tool result {message.get('tool_call_id')} answers no open call"
                )
            continue
        if pending:
            problems.append(f"[{position}] {role} message before the results of {pending}")
        calls = message.get("tool_calls") or () if role == "assistant" else ()
        pending = [call["id"] for call in calls]
    if pending:
        problems.append(f"request ends with unanswered calls {pending}")
    return problems


@contextlib.asynccontextmanager
async def fifo_lines(path: Path) -> AsyncIterator[asyncio.StreamReader]:
    """Lines written to the FIFO ``path``, readable with a deadline. Opened read-write so that
    a writer's ``open`` never blocks and the reader never sees EOF between writers."""
    os.mkfifo(path)
    reader = asyncio.StreamReader()
    pipe = os.fdopen(os.open(path, os.O_RDWR | os.O_NONBLOCK), "rb", buffering=0)
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    try:
        yield reader
    finally:
        transport.close()


@contextlib.contextmanager
def fifo_gate(path: Path) -> Iterator[None]:
    """A FIFO whose reader blocks until the gate opens (a line is written) on exit."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a writer exists: `cat` opens at once
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.write(fd, b"go\n")
        os.close(fd)  # the last writer gone: `cat` sees EOF and exits


async def test_kill_9_during_a_tool_call_heals_the_call_and_the_fake_never_sees_it_unpaired(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    trace_id = new_id("t")
    home = work / UNOWNED_DIR / trace_id  # where an ownerless trace's bash runs
    home.mkdir(parents=True)
    answer = "recovered after the crash"
    script = [
        Reply(text="Running the long job.", tool_calls=[Call("bash", {"command": PARK})], chunk=5),
        Reply(text=answer),
    ]
    async with FakeOpenAI(script=script) as fake:
        env = {
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": fake.api_key,
            "LONGHAUL_EXECUTOR__WORKING_ROOT": str(work),
        }
        victim = ExecutorProcess(nats_url, namespace, "exec-victim", env=env, log_dir=tmp_path)
        survivor = ExecutorProcess(nats_url, namespace, "exec-survivor", env=env, log_dir=tmp_path)
        with fifo_gate(home / "release.fifo"):
            async with fifo_lines(home / "started.fifo") as started:
                try:
                    await victim.start()
                    await create_trace(
                        store, "run the long job", trace_id=trace_id, model="openai:fake-model"
                    )
                    async with asyncio.timeout(WITHIN_S):
                        assert await started.readline() == b"started\n"
                    in_flight = await trace_state(store, trace_id)
                    [call] = in_flight.unanswered_tool_calls()  # recorded, result not yet
                    await victim.kill()
                    await survivor.start()
                    try:
                        state = await wait_for_trace(store, trace_id, within=WITHIN_S)
                    except TimeoutError as exc:
                        raise AssertionError(
                            f"{exc}\nvictim log:\n{victim.log_tail()}\n"
                            f"survivor log:\n{survivor.log_tail()}"
                        ) from None
                finally:
                    await victim.kill()
                    await survivor.stop()
        context = f"victim log:\n{victim.log_tail()}\nsurvivor log:\n{survivor.log_tail()}"

    assert state.status == "completed", f"{state.error}\n{context}"
    assert state.summary == answer

    # the survivor told the model the call was cut off, never re-running it
    path = state.main_path()
    assert [m.role for m in path] == ["user", "assistant", "tool", "assistant"], context
    assert [c.id for c in path[1].tool_calls or ()] == [call.id]
    healed = path[2]
    assert healed.tool_call_id == call.id and healed.name == "bash"
    assert healed.error_code == "cut_off" and isinstance(healed.content, str)
    assert "cut off" in healed.content and "outcome is unknown" in healed.content
    effect = state.ledger.get(call.id)
    assert effect is not None and [r.resolution for r in effect.resumed] == ["told_model"]
    assert path[3].content == answer
    assert (home / "runs.log").read_text() == "run\n"  # the bash command ran exactly once

    events = [recorded.event async for recorded in store.replay("trace", trace_id)]
    by_sequence = {e.sequence: e.actor for e in events if isinstance(e, ev.MessageAppended)}
    assert by_sequence[path[1].sequence] == "executor:exec-victim"
    assert by_sequence[healed.sequence] == "executor:exec-survivor"
    [completed] = [e for e in events if isinstance(e, ev.Completed)]
    assert completed.actor == "executor:exec-survivor"

    # on the wire: nothing refused, every request well paired, the heal sent with the call id
    assert fake.rejected == [], [r.json for r in fake.rejected]
    assert len(fake.requests) == 2
    for n, request in enumerate(fake.requests):
        assert pairing_problems(request.json["messages"]) == [], f"request {n}"
    wire = fake.requests[1].json["messages"]
    [result] = [m for m in wire if m["role"] == "tool"]
    assert result["tool_call_id"] == call.id and result["content"] == healed.content
