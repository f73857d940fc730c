"""The OpenAPI document is complete, and schemathesis fuzzing it against a live gateway finds
no server error and no response that contradicts the document."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import jsonschema
import pytest
from longhaul.core.config import NatsConfig

from tests.integration.gateway.harness import (
    RunningGateway,
    gateway_config,
    serve_gateway,
    sse_events,
    user_message,
)

FUZZ_KEY = "fuzz-key-0123456789"
ST_CONFIG = """\
# an event stream is read this far (its typed events are checked against the document)
max-stream-events = 3

[checks.negative_data_rejection]
# 413 is a correct refusal of an oversized (and so schema-violating) body.
expected-statuses = ["400", "401", "403", "404", "405", "409", "413", "422", "429"]

# /v1's model is any string, as OpenAI's is: one naming no preset or provider is refused with
# OpenAI's 400 or 404, so a schema-valid request may be refused there
[[operations]]
include-path = "/v1/chat/completions"
checks.positive_data_acceptance.expected-statuses = ["200", "400", "401", "404", "429"]

# a schedule's timing (exactly one of cron, every_s, at; cron's grammar; time zones) and a
# template's body (checked as POST /api/traces or /api/tasks checks it) are rules a JSON
# schema cannot state: a schema-valid body may be refused 422 (test_schedules)
[[operations]]
include-path-regex = "^/api/(schedules|triggers)(/[^/]+)?$"
include-method-regex = "^(POST|PATCH)$"
checks.positive_data_acceptance.expected-statuses = [
    "200", "201", "202", "401", "404", "409", "413", "422", "429",
]
"""

DOCUMENTED = {
    ("post", "/api/traces"),
    ("get", "/api/traces"),
    ("get", "/api/traces/running"),
    ("get", "/api/traces/{trace_id}"),
    ("get", "/api/traces/{trace_id}/messages"),
    ("get", "/api/traces/{trace_id}/events"),
    ("post", "/api/traces/{trace_id}/run"),
    ("post", "/api/traces/{trace_id}/stop"),
    ("post", "/api/traces/{trace_id}/resume"),
    ("post", "/api/traces/{trace_id}/reply"),
    ("post", "/api/traces/{trace_id}/reflect"),
    ("post", "/api/traces/{trace_id}/compact"),
    ("post", "/api/tasks"),
    ("post", "/api/runs"),
    ("get", "/api/tasks/{task_id}"),
    ("post", "/api/tasks/{task_id}/resume"),
    ("post", "/api/tasks/{task_id}/plan"),
    ("get", "/api/tasks/{task_id}/checkpoints"),
    ("delete", "/api/tasks/{task_id}/checkpoints"),
    ("get", "/api/tasks/{task_id}/events"),
    ("post", "/api/v1/tasks"),
    ("get", "/api/v1/tasks/{task_id}"),
    ("post", "/api/v1/tasks/{task_id}/resume"),
    ("get", "/api/experiences"),
    ("post", "/api/experiences"),
    ("get", "/api/experiences/export"),
    ("post", "/api/experiences/import"),
    ("get", "/api/experiences/{experience_id}"),
    ("patch", "/api/experiences/{experience_id}"),
    ("delete", "/api/experiences/{experience_id}"),
    ("get", "/api/skills"),
    ("get", "/api/info"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/.well-known/agent-card.json"),
}


async def test_openapi_documents_every_route(shared_client: httpx.AsyncClient) -> None:
    document = (await shared_client.get("/openapi.json")).json()
    operations = {(method, path) for path, item in document["paths"].items() for method in item}
    assert operations >= DOCUMENTED
    create = document["paths"]["/api/traces"]["post"]
    assert set(create["responses"]) >= {"202", "400", "401", "413", "422", "429"}
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    error = document["components"]["schemas"]["ErrorBody"]
    assert error["properties"]["error"]["$ref"].endswith("/ErrorDetail")


async def test_event_streams_describe_every_event_they_send(
    shared_client: httpx.AsyncClient,
) -> None:
    """Each frame of a real stream (stored events, then a heartbeat) matches the documented
    event schema, its ``data`` the schema of its event name."""
    document = (await shared_client.get("/openapi.json")).json()
    paths = document["paths"]
    for path in ("/api/tasks/{task_id}/events", "/api/traces/{trace_id}/events"):
        content = paths[path]["get"]["responses"]["200"]["content"]["text/event-stream"]
        assert "oneOf" in content["schema"], path
    schema = paths["/api/traces/{trace_id}/events"]["get"]["responses"]["200"]["content"][
        "text/event-stream"
    ]["schema"]
    branches = {branch["properties"]["event"]["const"]: branch for branch in schema["oneOf"]}
    assert {"trace_created", "message_appended", "live", "heartbeat", "error"} <= set(branches)
    components = {"components": document["components"]}
    created = await shared_client.post("/api/traces", json={"messages": [user_message("hi")]})
    trace_id = created.json()["trace_id"]
    seen: list[str] = []
    async with shared_client.stream("GET", f"/api/traces/{trace_id}/events") as response:
        async for frame in sse_events(response):
            as_sent = {"event": frame.event, "data": frame.data}
            if frame.id is not None:
                as_sent["id"] = frame.id
            jsonschema.validate(as_sent, {**schema, **components})
            data_schema = branches[frame.event]["properties"]["data"]["contentSchema"]
            jsonschema.validate(frame.json(), {**data_schema, **components})
            seen.append(frame.event)
            if frame.event == "heartbeat":
                break
    assert seen[0] == "trace_created" and seen[-1] == "heartbeat"
    wrong = {"event": "trace_created", "data": '{"type": "trace_created"}', "id": "1"}
    with pytest.raises(jsonschema.ValidationError):
        data_schema = branches["trace_created"]["properties"]["data"]["contentSchema"]
        jsonschema.validate(json.loads(wrong["data"]), {**data_schema, **components})


@pytest.fixture
async def fuzz_target(nats_config: NatsConfig) -> AsyncIterator[RunningGateway]:
    # no executor runs: a chat completion the fuzzer gets accepted answers "still going"
    config = gateway_config(
        nats_config,
        api_keys=FUZZ_KEY,
        metrics_keys=[FUZZ_KEY],
        rate_limit_per_minute=0,
        completion_timeout_s=1,
    )
    # frequent heartbeats: a stream the fuzzer reads (3 events) ends quickly once idle
    async with serve_gateway(config, heartbeat_s=0.05) as running:
        yield running


async def test_schemathesis_finds_no_server_error(
    fuzz_target: RunningGateway, tmp_path: Path
) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis is a dev dependency; run uv sync"
    config = tmp_path / "schemathesis.toml"
    config.write_text(ST_CONFIG)
    process = await asyncio.create_subprocess_exec(
        st,
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{fuzz_target.url}/openapi.json",
        "--checks",
        "all",
        # binary multipart uploads, which the fuzzer types as JSON (test_uploads), /readyz,
        # whose 503 without an executor is its contract (test_health), and the experience
        # import, a markdown file whose grammar a JSON schema cannot state
        # (test_experiences_api), and creating an eval, whose suite holds trace fields, regexes
        # and operator check names a JSON schema cannot state (test_evals_api); one regex: a
        # repeated option keeps only the last
        "--exclude-path-regex",
        "/(files|readyz|import|evals)$",
        "--max-examples",
        "15",
        "--seed",
        "7",
        "--workers",
        "1",
        "--request-timeout",
        "10",
        "-H",
        f"Authorization: Bearer {FUZZ_KEY}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,
    )
    async with asyncio.timeout(300):  # about 60 s on 2 idle cores, 105 s at load 4
        output, _ = await process.communicate()
    report = output.decode(errors="replace")
    assert process.returncode == 0, report[-6000:]
    summary = report.strip().splitlines()[-1]
    assert "failure" not in summary and "error" not in summary, report[-6000:]
    async with fuzz_target.client() as http:
        assert (await http.get("/healthz")).status_code == 200
