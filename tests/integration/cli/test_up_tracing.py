"""``longhaul up`` with an OTLP endpoint in its environment (issue 15 item 4): every service
exports to the collector, and one request is one trace — the client's span, the gateway's
server span, the executor's turn with its model and tool calls."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.integration.cli.harness import cli_env, running_up
from tests.support.otel import OtlpReceiver

DEADLINE_S = 60.0
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"


async def test_up_exports_one_trace_per_request_from_gateway_and_executor(
    tmp_path: Path,
) -> None:
    with OtlpReceiver() as receiver:
        env = cli_env(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint, OTEL_BSP_SCHEDULE_DELAY="50")
        async with running_up(tmp_path / "data", env) as url:
            async with httpx.AsyncClient(base_url=url, timeout=10.0) as http:
                response = await http.post(
                    "/api/traces",
                    json={"messages": [{"role": "user", "content": "hi"}], "tools": ["glob"]},
                    headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"},
                )
                assert response.status_code == 202, response.text
                trace = response.json()["trace_id"]
                request = await receiver.wait_for(
                    "POST /api/traces", within=DEADLINE_S, service="longhaul-gateway"
                )
                turn = await receiver.wait_for(
                    "invoke_agent", within=DEADLINE_S, service="longhaul-executor"
                )
                view = (await http.get(f"/api/traces/{trace}")).json()
    assert view["status"] == "completed"
    assert (request.trace_id, request.parent_span_id) == (CLIENT_TRACE, CLIENT_SPAN)
    assert (turn.trace_id, turn.parent_span_id) == (CLIENT_TRACE, request.span_id)
    assert turn.attributes["gen_ai.conversation.id"] == trace
    children = {s.name for s in receiver.spans if s.parent_span_id == turn.span_id}
    assert "execute_tool glob" in children and "chat auto" in children
