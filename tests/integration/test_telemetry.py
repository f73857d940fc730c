"""OpenTelemetry through the real stack (issue 15 item 4), with the SDK's in-memory exporter:
the gateway's request span, the executor's turns, GenAI ``chat`` and ``execute_tool`` spans, a
sub-trace's turns under the parent's tool span, the verifier and the planner continuing the
context the NATS headers carry; message contents only when opted in; and with nothing
configured, no context on any event or header."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from longhaul.core.config import LonghaulConfig, NatsConfig
from longhaul.core.store import EventStore, Position
from longhaul.core.telemetry import export_configured, setup_tracing, tracer, tracing_enabled
from longhaul.domain import events as ev
from longhaul.domain.config import ModelsConfig
from longhaul.domain.ids import new_id
from longhaul.llm.telemetry import CAPTURE_CONTENT_VARIABLE
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.integration.executor.checks import step_started
from tests.integration.executor.scripts import record_steps, write_script
from tests.integration.gateway.harness import gateway_config, serve_gateway, user_message
from tests.integration.planner.support import phase, planner_service, verifier_service, wait_task
from tests.support.otel import (
    OtlpReceiver,
    by_name,
    in_memory_tracing,
    parent_id,
    span_id,
    trace_id,
)
from tests.support.stack import ExecutorProcess, InProcessExecutor, create_trace, wait_for_trace

DEADLINE_S = 60
USAGE = {"prompt_tokens": 120, "completion_tokens": 9, "cache_read_tokens": 50}
CONTENT_ATTRIBUTES = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with in_memory_tracing() as exporter:
        yield exporter


def of_trace(spans: list[ReadableSpan], trace: str) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("longhaul.trace.id") == trace]


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


async def test_a_request_s_trace_reaches_executor_sub_trace_and_verifier(
    spans: InMemorySpanExporter, nats_config: NatsConfig, store: EventStore, tmp_path: Path
) -> None:
    # Children answer turn 0; the parent starts with one assistant message, so it delegates
    # (turn 1), then answers with JSON the verifier checks (turn 2).
    model = write_script(
        tmp_path / "tree.yaml",
        [
            {"content": "child finding PRIVATE-CHILD"},
            {"tool_calls": [{"name": "agent", "arguments": {"mode": "delegate", "task": "look"}}]},
            {"content": '{"ok": true}', "usage": USAGE},
        ],
    )
    work = tmp_path / "work"
    config = LonghaulConfig(nats=nats_config, working_root=work)
    async with (
        serve_gateway(gateway_config(nats_config), heartbeat_s=0.3) as gateway,
        InProcessExecutor(nats_config.url, nats_config.namespace, settings={"working_root": work}),
        verifier_service(config),
        gateway.client() as http,
    ):
        response = await http.post(
            "/api/traces",
            json={
                "messages": [
                    user_message("get ready PRIVATE-PROMPT"),
                    {"role": "assistant", "content": "ready"},
                    user_message("delegate, then answer"),
                ],
                "model": model,
                "verification": {"json_schema": {"type": "object", "required": ["ok"]}},
            },
        )
        assert response.status_code == 202, response.text
        parent = response.json()["trace_id"]
        state = await wait_for_trace(store, parent, within=DEADLINE_S)
    assert state.status == "completed", state.error
    [child] = state.subtraces
    [info] = state.subtraces.values()
    finished = list(spans.get_finished_spans())

    [request] = [
        s for s in by_name(tuple(finished), "POST /api/traces") if s.kind is SpanKind.SERVER
    ]
    status = {k: v for k, v in attributes(request).items() if k.endswith("status_code")}
    assert list(status.values()) == [202]  # http.status_code, or the stable name if opted in
    # One trace from the HTTP request down to the child's turns and the verifier.
    everything = [s for s in finished if trace_id(s) == trace_id(request)]
    parent_turns = by_name(tuple(of_trace(everything, parent)), "invoke_agent")
    assert len(parent_turns) >= 2  # before the child and after it (and the verdict)
    assert {parent_id(t) for t in parent_turns} == {span_id(request)}
    for turn in parent_turns:
        assert attributes(turn)["gen_ai.operation.name"] == "invoke_agent"
        assert attributes(turn)["gen_ai.conversation.id"] == parent

    chats = [s for s in everything if attributes(s).get("gen_ai.conversation.id") == parent]
    chats = by_name(tuple(chats), "chat ")
    assert len(chats) == 2
    turn_ids = {span_id(t) for t in parent_turns}
    for chat in chats:
        a = attributes(chat)
        assert chat.kind is SpanKind.CLIENT and parent_id(chat) in turn_ids
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "longhaul.scripted"
        assert a["gen_ai.request.model"] == str(tmp_path / "tree.yaml")
        assert chat.name == f"chat {tmp_path / 'tree.yaml'}"
    [answering] = [c for c in chats if attributes(c)["gen_ai.usage.input_tokens"] == 120]
    assert attributes(answering)["gen_ai.usage.output_tokens"] == 9
    assert attributes(answering)["gen_ai.usage.cache_read.input_tokens"] == 50
    assert attributes(answering)["gen_ai.response.finish_reasons"] == ("stop",)

    [tool] = by_name(tuple(everything), "execute_tool agent")
    assert attributes(tool)["gen_ai.operation.name"] == "execute_tool"
    assert attributes(tool)["gen_ai.tool.name"] == "agent"
    assert attributes(tool)["gen_ai.tool.call.id"] == info.tool_call_id
    assert parent_id(tool) in turn_ids
    # The child's turns are children of the tool span that spawned it.
    child_turns = by_name(tuple(of_trace(everything, child)), "invoke_agent")
    assert child_turns and {parent_id(t) for t in child_turns} == {span_id(tool)}
    [child_chat] = [
        s
        for s in by_name(tuple(everything), "chat ")
        if attributes(s)["gen_ai.conversation.id"] == child
    ]
    assert parent_id(child_chat) in {span_id(t) for t in child_turns}

    # The verifier continued the turn that asked it (from the message's NATS headers).
    [verify] = by_name(tuple(everything), "process verification_requested")
    assert verify.kind is SpanKind.CONSUMER and parent_id(verify) in turn_ids
    assert attributes(verify)["messaging.system"] == "nats"

    # Contents were not opted in: no prompt, answer, arguments or result on any span.
    for span in finished:
        for key in CONTENT_ATTRIBUTES:
            assert key not in attributes(span), (span.name, key)
        assert "PRIVATE" not in json.dumps({k: str(v) for k, v in attributes(span).items()})

    # The context lives on the log: the created event and its NATS headers carry it.
    created = await store.conn.js.get_msg(
        store.names.stream, subject=store.names.subject("trace", parent, "trace_created")
    )
    assert created.headers is not None
    assert created.headers["traceparent"] == state.run_trace_context["traceparent"]  # type: ignore[index]
    assert f"{trace_id(request):032x}-{span_id(request):016x}" in created.headers["traceparent"]


async def test_a_task_s_planner_and_step_trace_continue_the_request(
    spans: InMemorySpanExporter, nats_config: NatsConfig, store: EventStore, tmp_path: Path
) -> None:
    model = write_script(tmp_path / "a.yaml", [{"content": "result of a"}])
    config = LonghaulConfig(nats=nats_config, models=ModelsConfig(default="scripted:auto"))
    async with (
        serve_gateway(gateway_config(nats_config), heartbeat_s=0.3) as gateway,
        InProcessExecutor(
            nats_config.url, nats_config.namespace, settings={"working_root": tmp_path}
        ),
        planner_service(config),
        gateway.client() as http,
    ):
        response = await http.post(
            "/api/tasks", json={"goal": "a goal", "options": {"phases": [phase("a", model=model)]}}
        )
        assert response.status_code == 202, response.text
        task_id = response.json()["task_id"]
        task = await wait_task(store, task_id)
    assert task.status == "completed", task.error
    [step] = task.phases["a"].trace_ids
    finished = tuple(spans.get_finished_spans())
    [request] = [s for s in by_name(finished, "POST /api/tasks") if s.kind is SpanKind.SERVER]
    [planning] = by_name(finished, "process task_created")
    assert parent_id(planning) == span_id(request) and trace_id(planning) == trace_id(request)
    assert attributes(planning)["longhaul.task.id"] == task_id
    [turn] = by_name(tuple(of_trace(list(finished), step)), "invoke_agent")
    assert trace_id(turn) == trace_id(request)
    planner_spans = {span_id(s) for s in by_name(finished, "process ")}
    assert parent_id(turn) in planner_spans  # the planner step that created the step trace
    assert attributes(turn)["longhaul.task.id"] == task_id


async def test_message_contents_go_on_spans_only_when_opted_in(
    spans: InMemorySpanExporter,
    nats_config: NatsConfig,
    store: EventStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
    write = {"name": "write", "arguments": {"path": "n.txt", "content": "ARGUMENT-MARK"}}
    model = write_script(tmp_path / "w.yaml", [{"tool_calls": [write]}, {"content": "ANSWER-MARK"}])
    async with InProcessExecutor(
        nats_config.url, nats_config.namespace, settings={"working_root": tmp_path / "work"}
    ):
        with tracer().start_as_current_span("client") as client:
            trace = await create_trace(store, "PROMPT-MARK", model=model)
        state = await wait_for_trace(store, trace, within=DEADLINE_S)
    assert state.status == "completed", state.error
    finished = tuple(spans.get_finished_spans())
    turns = by_name(tuple(of_trace(list(finished), trace)), "invoke_agent")
    assert {parent_id(t) for t in turns} == {client.get_span_context().span_id}
    first, second = sorted(by_name(finished, "chat "), key=lambda s: s.start_time or 0)
    assert "PROMPT-MARK" in str(attributes(first)["gen_ai.input.messages"])
    assert "gen_ai.system_instructions" in attributes(first)
    output = json.loads(str(attributes(second)["gen_ai.output.messages"]))
    assert output == [{"role": "assistant", "content": "ANSWER-MARK"}]
    [tool] = by_name(finished, "execute_tool write")
    assert "ARGUMENT-MARK" in str(attributes(tool)["gen_ai.tool.call.arguments"])
    assert "gen_ai.tool.call.result" in attributes(tool)


async def test_with_nothing_configured_no_tracing_and_no_context_on_events(
    nats_config: NatsConfig, store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert not export_configured()
    assert setup_tracing("executor") is None and not tracing_enabled()
    assert not export_configured(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}
    )
    assert not export_configured(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}
    )
    assert export_configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x"})
    model = write_script(
        tmp_path / "w.yaml",
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "n.txt", "content": "x"}}]},
            {"content": "done"},
        ],
    )
    async with (
        serve_gateway(gateway_config(nats_config), heartbeat_s=0.3) as gateway,
        InProcessExecutor(
            nats_config.url, nats_config.namespace, settings={"working_root": tmp_path / "work"}
        ),
        gateway.client() as http,
    ):
        response = await http.post(
            "/api/traces",
            json={"messages": [user_message("go")], "model": model},
            headers={"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        )
        assert response.status_code == 202, response.text
        trace = response.json()["trace_id"]
        state = await wait_for_trace(store, trace, within=DEADLINE_S)
    assert state.status == "completed", state.error
    events = [r.event async for r in store.replay("trace", trace)]
    assert len(events) >= 4 and all(e.trace_context is None for e in events)
    assert state.run_trace_context is None
    seq, seen = 0, 0
    while seen < len(events):
        stored = await store.conn.js.get_msg(
            store.names.stream,
            seq=seq + 1,
            subject=store.names.aggregate_filter("trace", trace),
            next=True,
        )
        assert "traceparent" not in (stored.headers or {})
        seq, seen = int(stored.seq or 0), seen + 1


TRACE_HEX = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_HEX = "00f067aa0ba902b7"


def write_then_answer(path: Path) -> str:
    write = {"name": "write", "arguments": {"path": "n.txt", "content": "x"}}
    return write_script(path, [{"tool_calls": [write]}, {"content": "done", "usage": USAGE}])


async def test_a_subprocess_executor_exports_over_otlp_http_to_a_loopback_receiver(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = write_then_answer(tmp_path / "w.yaml")
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SERVICE_NAME": "lh-exec-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "LONGHAUL_EXECUTOR__WORKING_ROOT": str(tmp_path / "work"),
        }
        async with ExecutorProcess(nats_url, namespace, "exec-otlp", env=env):
            # A trace started under a span of some other process: the event carries it.
            trace = new_id("t")
            created = ev.TraceCreated(
                messages=[ev.InputMessage(role="user", content="go")],
                config=ev.TraceConfig(model=model),
                trace_context={"traceparent": f"00-{TRACE_HEX}-{SPAN_HEX}-01"},
            )
            await store.append("trace", trace, [created], expected=Position(), actor="test")
            state = await wait_for_trace(store, trace, within=DEADLINE_S)
            assert state.status == "completed", state.error
            turn = await receiver.wait_for("invoke_agent", within=DEADLINE_S)
    assert receiver.content_types == {"application/x-protobuf"}
    assert turn.service == "lh-exec-under-test"
    assert (turn.trace_id, turn.parent_span_id) == (TRACE_HEX, SPAN_HEX)
    assert turn.attributes["gen_ai.conversation.id"] == trace
    chats = [s for s in receiver.spans if s.name.startswith("chat ")]
    assert len(chats) == 2 and {c.parent_span_id for c in chats} == {turn.span_id}
    [answer] = [c for c in chats if c.attributes["gen_ai.usage.input_tokens"] == 120]
    assert answer.attributes["gen_ai.usage.output_tokens"] == 9
    assert answer.attributes["gen_ai.usage.cache_read.input_tokens"] == 50
    assert answer.attributes["gen_ai.provider.name"] == "longhaul.scripted"
    [tool] = [s for s in receiver.spans if s.name == "execute_tool write"]
    [call] = [c for m in state.main_path() for c in m.tool_calls or []]
    assert tool.attributes["gen_ai.tool.call.id"] == call.id
    assert tool.parent_span_id == turn.span_id and tool.trace_id == TRACE_HEX


async def test_a_subprocess_executor_with_the_sdk_disabled_exports_nothing(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    model = write_then_answer(tmp_path / "w.yaml")
    with OtlpReceiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SDK_DISABLED": "true",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "LONGHAUL_EXECUTOR__WORKING_ROOT": str(tmp_path / "work"),
        }
        async with ExecutorProcess(nats_url, namespace, "exec-off", env=env) as process:
            trace = await create_trace(store, "go", model=model)
            state = await wait_for_trace(store, trace, within=DEADLINE_S)
            assert state.status == "completed", state.error
            assert await process.stop() == 0  # a clean exit would have flushed any batch
    assert receiver.requests == 0 and receiver.spans == []
    events = [r.event async for r in store.replay("trace", trace)]
    assert all(e.trace_context is None for e in events)


async def test_a_turn_resumed_after_kill_9_continues_the_original_trace(
    nats_url: str, namespace: str, store: EventStore, tmp_path: Path
) -> None:
    """The run's context lives on its log, so the survivor's turn is a child of the same
    span as the victim's: the request that started the run."""
    log = tmp_path / "calls.jsonl"
    # the third step's call holds until the kill (3 s), however slow or fast the box
    model = record_steps(tmp_path / "steps.yaml", 6, log, hold_ms=40, held={2: 3000})
    with OtlpReceiver() as receiver:

        def env(name: str) -> dict[str, str]:
            return {
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_SERVICE_NAME": name,
                "OTEL_BSP_SCHEDULE_DELAY": "50",
                "LONGHAUL_EXECUTOR__TOOL_MODULES": "tests.integration.executor.tooling",
            }

        async with (
            ExecutorProcess(nats_url, namespace, "exec-a", env=env("exec-a")) as first,
            ExecutorProcess(nats_url, namespace, "exec-b", env=env("exec-b")) as second,
        ):
            trace = new_id("t")
            created = ev.TraceCreated(
                messages=[ev.InputMessage(role="user", content="six steps")],
                config=ev.TraceConfig(model=model),
                trace_context={"traceparent": f"00-{TRACE_HEX}-{SPAN_HEX}-01"},
            )
            await store.append("trace", trace, [created], expected=Position(), actor="test")

            started = await step_started(log, 2, within=DEADLINE_S)
            victim, survivor = (first, second) if first.pid == started["pid"] else (second, first)
            await victim.kill()
            state = await wait_for_trace(store, trace, within=DEADLINE_S)
            assert state.status == "completed", state.error
            turn = await receiver.wait_for(
                "invoke_agent", within=DEADLINE_S, service=survivor.executor_id
            )
    assert turn.attributes["longhaul.executor"] == f"executor:{survivor.executor_id}"
    assert (turn.trace_id, turn.parent_span_id) == (TRACE_HEX, SPAN_HEX)
    # Every model call, the victim's that made it out before the kill too, is in that trace.
    chats = [s for s in receiver.spans if s.name.startswith("chat ")]
    assert len(chats) >= 5 and {s.trace_id for s in chats} == {TRACE_HEX}


@pytest.mark.parametrize("opted_in", [False, True])
async def test_a_query_string_goes_on_the_request_span_only_when_opted_in(
    opted_in: bool,
    spans: InMemorySpanExporter,
    nats_config: NatsConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if opted_in:
        monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
    async with (
        serve_gateway(gateway_config(nats_config), heartbeat_s=0.3) as gateway,
        gateway.client() as http,
    ):
        response = await http.get("/api/traces", params={"cursor": "QUERY-MARK"})
    assert response.status_code in (200, 400, 422), response.text
    [request] = [
        s
        for s in by_name(tuple(spans.get_finished_spans()), "GET /api/traces")
        if s.kind is SpanKind.SERVER
    ]
    assert ("QUERY-MARK" in str(attributes(request))) is opted_in
