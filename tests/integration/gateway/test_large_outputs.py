"""Large tool outputs through the stack (issue 24 item 3): ``bash("seq 1 200000")`` (1.3 MB)
is stored whole; the model sees head and tail, the true size, the exit code and a key it reads
on with ``workspace_read(offset, length)``; the gateway serves the whole output."""

from __future__ import annotations

from pathlib import Path

from longhaul.core.store import EventStore

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import RunningGateway, user_message
from tests.integration.gateway.test_uploads import final_view
from tests.support.folds import trace_state
from tests.support.stack import InProcessExecutor

WHOLE = "".join(f"{n}\n" for n in range(1, 200_001))  # 1,288,895 bytes
CAP = 30_000


async def test_a_large_output_is_stored_whole_and_the_model_told_the_truth(
    gateway: RunningGateway, store: EventStore, nats_url: str, namespace: str, tmp_path: Path
) -> None:
    offset = WHOLE.index("\n100000\n") + 1
    count = write_script(
        tmp_path / "count.yaml",
        [
            {
                "tool_calls": [
                    {"id": "c0", "name": "bash", "arguments": {"command": "seq 1 200000"}}
                ]
            },
            {"content": "counted"},
        ],
    )
    async with (
        InProcessExecutor(nats_url, namespace, settings={"working_root": tmp_path / "work"}),
        gateway.client() as http,
    ):
        body = {"messages": [user_message("count")], "model": count}
        trace_id = (await http.post("/api/traces", json=body)).json()["trace_id"]
        assert (await final_view(http, store, trace_id))["status"] == "completed"
        # A second run reads on in the stored output by the key the first result named (a
        # script's turn N answers a request holding N assistant messages: turns 0-1 are done).
        key = f"outputs/{trace_id}/c0"
        read = {"key": key, "offset": offset, "length": 14}
        reader = write_script(
            tmp_path / "read.yaml",
            [
                {"content": "-"},
                {"content": "-"},
                {"tool_calls": [{"id": "c1", "name": "workspace_read", "arguments": read}]},
                {"content": "read it"},
            ],
        )
        body = {"messages": [user_message("read on")], "model": reader}
        after = (await trace_state(store, trace_id)).stream_seq
        assert (await http.post(f"/api/traces/{trace_id}/run", json=body)).status_code == 202
        view = await final_view(http, store, trace_id, after)
        assert view["status"] == "completed", view
        messages = (await http.get(f"/api/traces/{trace_id}/messages")).json()["messages"]
        whole = await http.get(f"/api/traces/{trace_id}/outputs/c0")
        missing = await http.get(f"/api/traces/{trace_id}/outputs/nope")
    outputs = [m["content"] for m in messages if m["role"] == "tool"]
    seen = outputs[0]
    assert len(seen) <= CAP, len(seen)
    assert seen.startswith("1\n2\n3\n") and seen.endswith("199999\n200000\n\n[exit code 0]")
    assert f"output is {len(WHOLE)} bytes in all" in seen
    assert f"workspace_read(key={key!r}" in seen
    assert "cut by the output cap" not in seen
    assert outputs[1].startswith("100000\n100001")  # offset/length read of the stored output
    assert whole.status_code == 200 and whole.text == WHOLE
    assert missing.status_code == 404
