"""Failure handling: reflection, replanning that keeps completed phases, the replan limit,
and the single-agent fallback."""

from __future__ import annotations

import json
from pathlib import Path

from longhaul.core.connection import Connection
from longhaul.core.store import EventStore
from longhaul.core.workspace import WorkspaceStore
from longhaul.domain import events as ev
from longhaul.planner.offload import phase_output_key
from longhaul.planner.replan import SINGLE_AGENT_ID

from tests.integration.planner.conftest import ConfigFactory
from tests.integration.planner.support import (
    Fail,
    Outcome,
    StepCompleter,
    Succeed,
    chain,
    create_task,
    failing,
    planner_service,
    run_task,
    task_events,
    wait_task,
)
from tests.support.llm_fakes import FakeOpenAI, Reply

CHAIN = chain(4)


async def test_failed_phase_is_replanned_and_completed_phases_are_kept(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    workspace = WorkspaceStore(conn)
    completer = StepCompleter(conn, store, failing("p3", times=1))
    async with completer, planner_service(make_config()):
        task_id = await create_task(store, phases=CHAIN)
        before = await wait_task(store, task_id, lambda t: bool(t.replans) or t.is_final)
        revisions = {}
        for pid in ("p1", "p2"):
            entry = await workspace.get(phase_output_key(task_id, pid))
            assert entry is not None
            revisions[pid] = entry.revision
        task = await wait_task(store, task_id)
    assert task.status == "completed"
    events = await task_events(store, task_id)
    [failed] = [e for e in events if isinstance(e, ev.PhaseFailed)]
    assert failed.phase_id == "p3" and "p3 broke (attempt 1)" in failed.error
    [replanned] = [e for e in events if isinstance(e, ev.Replanned)]
    assert replanned.kept == ["p1", "p2"]
    assert [p.id for p in replanned.phases] == ["p3", "p4"]
    assert "p3 broke" in replanned.reflection
    assert "p3 broke" in replanned.phases[0].description  # the retry knows what went wrong
    # Phases 1-2: same output entries (same revision), same summaries, never run again.
    for pid in ("p1", "p2"):
        entry = await workspace.get(phase_output_key(task_id, pid))
        assert entry is not None and entry.revision == revisions[pid]
        assert entry.value == f"output of {pid}".encode()
        assert task.phases[pid].summary == before.phases[pid].summary
        assert len(completer.trace_ids(pid)) == 1
    assert len(completer.trace_ids("p3")) == 2
    assert len(set(completer.trace_ids("p3"))) == 2  # the retry is a fresh step trace
    assert [e.phase_id for e in events if isinstance(e, ev.PhaseStarted)].count("p1") == 1


async def test_replan_limit_fails_the_task_with_all_reflections(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    task, completer = await run_task(
        conn,
        store,
        make_config(max_replan_attempts=2, single_agent_fallback=False),
        CHAIN[:3],
        policy=failing("p2", 99),
    )
    assert task.status == "failed"
    assert task.error == "phase p2 failed after 2 replans"
    events = await task_events(store, task.task_id)
    [failed] = [e for e in events if isinstance(e, ev.TaskFailed)]
    assert len(failed.reflections) == 3
    assert all("p2 broke" in r for r in failed.reflections)
    assert len(completer.trace_ids("p2")) == 3
    assert len(completer.trace_ids("p1")) == 1


async def test_single_agent_fallback_after_the_replan_limit(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    config = make_config(max_replan_attempts=1)  # the fallback is on by default
    task, completer = await run_task(
        conn, store, config, CHAIN[:3], policy=failing("p2", times=99), goal="write the report"
    )
    assert task.status == "completed"
    assert list(task.phases) == ["p1", SINGLE_AGENT_ID]
    fallback = task.phases[SINGLE_AGENT_ID].spec
    assert fallback.depends_on == ["p1"]  # it builds on what was completed
    [created] = completer.seen[SINGLE_AGENT_ID]
    brief = created.messages[0].content
    assert isinstance(brief, str) and "write the report" in brief and "output of p1" in brief
    assert task.summary == f"output of {SINGLE_AGENT_ID}"


async def test_model_replan_uses_the_reflection_and_new_phases(
    conn: Connection, store: EventStore, make_config: ConfigFactory, tmp_path: Path
) -> None:
    new_plan = {
        "phases": [
            {
                "id": "p3b",
                "name": "Smaller step",
                "description": "do p3 in a smaller way, carefully",
                "depends_on": ["p2"],
                "criteria": ["works"],
                "tools": [],
            },
        ]
    }
    script = tmp_path / "planner.yaml"
    script.write_text(
        json.dumps(
            [
                {"content": "p3 was too big; split it"},
                {"content": json.dumps(new_plan)},
            ]
        )
    )
    task, _ = await run_task(
        conn,
        store,
        make_config(roles={"planner": f"scripted:{script}"}),
        CHAIN[:3],
        policy=failing("p3", times=1),
    )
    assert task.status == "completed"
    assert task.order == ["p1", "p2", "p3b"]
    assert task.replans == ["p3 was too big; split it"]


async def test_research_that_finds_nothing_is_replanned_with_new_keywords(
    conn: Connection, store: EventStore, make_config: ConfigFactory
) -> None:
    """The design's research failure path: the search phase finds nothing and fails, the
    planner model (a local server speaking OpenAI's wire format) reflects on why and replans
    the search with other keywords; the new search's step trace is briefed with them and the
    report builds on its result."""

    def search(pid: str, keywords: str) -> dict[str, object]:
        return {
            "id": pid,
            "name": f"Search: {keywords}",
            "description": f"search the web for: {keywords}; collect sources",
            "preset": "explore",
            "criteria": ["at least three sources"],
        }

    def report(after: str) -> dict[str, object]:
        return {
            "id": "report",
            "name": "Write the report",
            "description": "write the comparison report from the search results",
            "depends_on": [after],
            "criteria": ["compares both products"],
        }

    reflection = "The keywords were too old and narrow: search current pricing pages."
    first = [search("search", "feishu dingtalk pricing 2019"), report("search")]
    second = [search("search-2", "飞书 钉钉 价格 2026 official pricing"), report("search-2")]
    script = [
        Reply(text=json.dumps({"phases": first})),
        Reply(text=reflection),
        Reply(text=json.dumps({"phases": second})),
    ]

    async def nothing_found_for_old_keywords(created: ev.TraceCreated, _n: int) -> Outcome:
        if "pricing 2019" in str(created.messages[0].content):
            return Fail("search returned no results for 'feishu dingtalk pricing 2019'")
        return Succeed(f"output of {created.phase_id}")

    async with FakeOpenAI(script=script) as provider:
        config = make_config()
        config.models = provider.models_config().model_copy(
            update={"default": "scripted:auto", "roles": {"planner": "openai:fake-model"}}
        )
        task, completer = await run_task(
            conn,
            store,
            config,
            None,
            policy=nothing_found_for_old_keywords,
            goal="Compare Feishu and DingTalk pricing and write a report",
        )
    assert task.status == "completed" and task.plan_source == "model"
    assert task.order == ["search-2", "report"] and task.replans == [reflection]
    replan_request = json.dumps(json.loads(provider.requests[2].body)["messages"])
    assert "no results" in replan_request and "too old and narrow" in replan_request
    events = await task_events(store, task.task_id)
    [failed] = [e for e in events if isinstance(e, ev.PhaseFailed)]
    assert failed.phase_id == "search" and "no results" in failed.error
    [replanned] = [e for e in events if isinstance(e, ev.Replanned)]
    assert replanned.kept == [] and "2026 official pricing" in replanned.phases[0].description
    [retry] = completer.seen["search-2"]
    assert "飞书 钉钉 价格 2026" in str(retry.messages[0].content)
    assert "output of search-2" in str(completer.seen["report"][0].messages[0].content)
