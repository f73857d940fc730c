"""Operators add their own middleware by configuration alone: the audit-log example is loaded
by import path and by entry point, placed among the built-ins, and writes one line per tool
call; misplaced or broken entries are refused when the chain is built."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from longhaul.agent import default_middleware
from longhaul.domain.config import MiddlewareEntry, PipelineConfig

from examples.audit_log.audit_log import AuditLog
from tests.unit.agent.support import (
    MemorySink,
    answer,
    call,
    calls,
    make_engine,
    new_state,
    scripted,
    trace_dir,
)

USE = "examples.audit_log.audit_log:AuditLog"


def audit(tmp_path: Path, *, before: str | None = None, after: str | None = None) -> PipelineConfig:
    entry = MiddlewareEntry(
        name="AuditLog",
        use=USE,
        options={"path": str(tmp_path / "audit.jsonl")},
        before=before,
        after=after,
    )
    return PipelineConfig(middleware=[entry])


def names(config: PipelineConfig) -> list[str]:
    return [type(m).__name__ for m in default_middleware(config)]


async def test_the_audit_log_records_every_tool_call_without_touching_the_engine(
    tmp_path: Path,
) -> None:
    config = audit(tmp_path, before="Guardrail")
    work = tmp_path / "work"
    (trace_dir(work) / "a.txt").write_text("alpha")
    engine = make_engine(work, config=config, middleware=default_middleware(config))
    model, _ = scripted(
        calls(call("read", {"path": "a.txt"}, id="r1"), call("read", {"path": "../x"}, id="r2")),
        answer("read it"),
    )
    state = new_state("read a.txt")
    assert (await engine.run_turn(state, MemorySink(state), model=model)).end == "completed"
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(r["tool"], r["tool_call_id"], r["trace_id"]) for r in lines] == [
        ("read", "r1", state.trace_id),
        ("read", "r2", state.trace_id),
    ]
    assert lines[0]["outcome"] == "ok"
    assert lines[1]["outcome"] == "path_outside_workdir"  # refused inside, still audited


def test_placement_before_and_after_a_builtin() -> None:
    after = names(audit(Path("/tmp/x"), after="Guardrail"))
    assert after[after.index("Guardrail") + 1] == "AuditLog"
    before = names(audit(Path("/tmp/x"), before="TokenUsage"))
    assert before[before.index("TokenUsage") - 1] == "AuditLog"
    default = names(audit(Path("/tmp/x")))
    assert default[-2:] == ["AuditLog", "ToolApproval"]  # last configurable, inside the gate


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"use": USE, "before": "ToolErrorHandling"}, "outside the framework layers"),
        ({"use": USE, "after": "ToolApproval"}, "outside the framework layers"),
        ({"use": USE, "after": "Nope"}, "no middleware 'Nope'"),
        ({"use": USE, "after": "Guardrail", "before": "TokenUsage"}, "not both"),
        ({"use": "examples.audit_log.audit_log:Missing"}, "cannot load"),
        ({"use": "json:dumps"}, "not a longhaul Middleware"),
        ({"use": "no-such-plugin"}, "entry points"),
        ({"use": USE, "options": {"path": "/tmp/x", "colour": "red"}}, "options"),
        ({"after": "Guardrail"}, "operator middleware"),
    ],
)
def test_a_bad_entry_is_refused_with_its_name(entry: dict, message: str) -> None:
    entry.setdefault("options", {"path": "/tmp/x"} if "use" in entry else {})
    config = PipelineConfig(middleware=[MiddlewareEntry(name="AuditLog", **entry)])
    with pytest.raises(ValueError, match="AuditLog") as raised:
        default_middleware(config)
    assert message in str(raised.value)


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[None]:
    """A real installed distribution (a dist-info directory on sys.path) whose entry point in
    the longhaul.middleware group names the audit log."""
    dist = tmp_path / "site" / "acme_audit-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-audit\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[longhaul.middleware]\nacme-audit = {USE}\n")
    sys.path.insert(0, str(tmp_path / "site"))
    try:
        yield
    finally:
        sys.path.remove(str(tmp_path / "site"))


@pytest.mark.usefixtures("installed_plugin")
def test_an_installed_plugin_is_found_by_its_entry_point(tmp_path: Path) -> None:
    entry = MiddlewareEntry(
        name="acme", use="acme-audit", after="Guardrail", options={"path": str(tmp_path / "a")}
    )
    chain = default_middleware(PipelineConfig(middleware=[entry]))
    assert any(isinstance(m, AuditLog) for m in chain)
