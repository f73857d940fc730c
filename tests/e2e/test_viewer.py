"""The run viewer in headless Chromium (Debian's, driven by Playwright — no browser download):
the trace list, a trace's branches after a rewind, a rewind started from the page, live
tokens, a reply to a waiting trace, a task's phase DAG, and a key-protected gateway.

One browser per module; each test gets a fresh context (its own sessionStorage)."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from longhaul.core.config import NatsConfig
from longhaul.core.index import TraceIndex
from longhaul.core.store import EventStore, Position
from longhaul.domain import events as ev
from longhaul.domain.messages import FunctionCall, ToolCall
from playwright.async_api import Browser, Page, async_playwright, expect

from tests.integration.executor.scripts import write_script
from tests.integration.gateway.harness import (
    RunningGateway,
    append_as_executor,
    gateway_config,
    serve_gateway,
)
from tests.support.folds import task_state, trace_state
from tests.support.stack import eventually

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (Debian: apt-get install -y chromium); "
    "the run-viewer browser tests need it",
)
WAIT_MS = 20_000
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    assert CHROMIUM is not None
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context()
    opened = await context.new_page()
    opened.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield opened
    finally:
        await context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


async def until(http: httpx.AsyncClient, trace_id: str, *names: str, after: int = 0) -> None:
    """Wait (bounded) for one of the named events on the trace's SSE stream after ``after``."""
    async with asyncio.timeout(30):
        async with http.stream(
            "GET", f"/api/traces/{trace_id}/events", params={"after": after}
        ) as events:
            async for line in events.aiter_lines():
                if line.startswith("event: ") and line[7:] in names:
                    return


async def start(http: httpx.AsyncClient, text: str, **body: Any) -> str:
    response = await http.post(
        "/api/traces", json={"messages": [{"role": "user", "content": text}], **body}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["trace_id"])


async def opened(stack: RunningGateway, page: Page, text: str) -> str:
    """A trace on ``scripted:auto`` without tools, completed, its page open."""
    async with stack.client() as http:
        trace = await start(http, text, model="scripted:auto", tools=[])
        await until(http, trace, "completed")
    await page.goto(f"{stack.url}/#/traces/{trace}")
    return trace


@contextlib.asynccontextmanager
async def written_trace(
    nats_config: NatsConfig, store: EventStore, text: str, *events: ev.TraceEvent
) -> AsyncIterator[tuple[RunningGateway, str]]:
    """A gateway and a trace on it whose messages the test wrote (no executor: the trace
    stays running)."""
    async with serve_gateway(gateway_config(nats_config)) as gateway:
        async with gateway.client() as http:
            trace = await start(http, text)
        await append_as_executor(store, trace, *events)
        yield gateway, trace


def message(page: Page, sequence: int) -> Any:
    return page.locator(f'[data-testid="message"][data-sequence="{sequence}"]')


async def test_viewer_assets_are_static_modules_and_safe(stack: RunningGateway) -> None:
    async with httpx.AsyncClient(base_url=stack.url) as http:
        page = await http.get("/")
        app = await http.get("/ui/app.js")
        css = await http.get("/ui/viewer.css")
        missing = await http.get("/ui/..%2Fapp.py")
        modules = [
            (await http.get(f"/ui/{name}")).text
            for name in (
                "api.js",
                "dom.js",
                "sse.js",
                "tree.js",
                "trace.js",
                "list.js",
                "evals.js",
                "inbox.js",
                "usage.js",
            )
        ]
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/ui/app.js">' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert app.headers["content-type"].startswith("text/javascript")
    assert css.headers["content-type"].startswith("text/css")
    assert missing.status_code == 404
    for text in [app.text, *modules]:
        assert "innerHTML" not in text  # everything is rendered with textContent
    assert "localStorage" not in modules[0]  # the key is kept for the session only


async def test_list_filters_searches_nests_and_updates(
    stack: RunningGateway, store: EventStore, page: Page
) -> None:
    async with stack.client() as http:
        alpha = await start(http, "alpha", model="scripted:auto", tools=[], name="alpha one")
        beta = await start(http, "beta", model="scripted:auto", tools=[], name="beta two")
        asks = await start(http, "ask", model="scripted:auto", tools=["ask_human"], name="gamma")
        await until(http, alpha, "completed")
        await until(http, beta, "completed")
        await until(http, asks, "waiting")
    child = "t_child" + alpha[2:14]
    created = ev.TraceCreated(
        messages=[ev.InputMessage(role="user", content="sub")],
        parent_trace_id=alpha,
        name="alpha's helper",
        config=ev.TraceConfig(model="scripted:auto", tools=[]),
    )
    await store.append("trace", child, [created], expected=Position())
    await TraceIndex(store.conn).update(await trace_state(store, child))

    await page.goto(stack.url + "/")
    rows = page.locator('[data-testid="trace-row"]')
    await expect(rows).to_have_count(4)
    # the sub-trace is nested under its parent, not listed at the top level
    parent_row = page.locator(f'[data-testid="trace-row"][data-trace-id="{alpha}"]')
    await expect(
        parent_row.locator(f'[data-testid="children"] [data-trace-id="{child}"]')
    ).to_contain_text("alpha's helper")
    await expect(parent_row.locator(".row-line").first).to_contain_text("(2 traces)")
    # newest first
    top = page.locator('[data-testid="trace-list"] > ul > [data-testid="trace-row"]')
    assert await top.evaluate_all("rows => rows.map(r => r.dataset.traceId)") == [
        asks,
        beta,
        alpha,
    ]

    await page.select_option('[data-testid="status-filter"]', "waiting")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-trace-id", asks)
    await expect(rows.first).to_contain_text("waiting (human)")

    await page.select_option('[data-testid="status-filter"]', "")
    await page.fill('[data-testid="search"]', "BETA")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-trace-id", beta)

    # live: a trace started elsewhere shows up without a reload
    await page.fill('[data-testid="search"]', "")
    await expect(rows).to_have_count(4)
    async with stack.client() as http:
        later = await start(http, "later", model="scripted:auto", tools=[], name="started later")
    await expect(page.locator(f'[data-trace-id="{later}"]')).to_contain_text("started later")


async def test_trace_with_a_rewind_switches_between_readable_branches(
    stack: RunningGateway, page: Page
) -> None:
    async with stack.client() as http:
        trace = await start(http, "find the files", model="scripted:auto", tools=["glob"])
        await until(http, trace, "completed")
        rewound = await http.post(
            f"/api/traces/{trace}/run",
            json={"after_sequence": 1, "messages": [{"role": "user", "content": "not those"}]},
        )
        assert rewound.status_code == 202
        await until(http, trace, "completed", after=rewound.json()["event_id"])
        path = (await http.get(f"/api/traces/{trace}/messages")).json()["messages"]
    new_branch = path[1]["sequence"]
    assert path[1]["parent_sequence"] == 1 and new_branch > 4

    await page.goto(f"{stack.url}/#/traces/{trace}")
    # the main path: the new branch, with a switch where the old one forks off
    await expect(message(page, new_branch)).to_contain_text("not those")
    await expect(message(page, 2)).to_have_count(0)
    switch = page.locator('[data-testid="branch-switch"]')
    await expect(switch).to_have_count(1)
    await expect(switch).to_have_attribute("data-count", "2")
    await expect(switch).to_have_attribute("data-index", "1")

    # the older branch stays readable: its tool call paired with the result
    await switch.locator("button.prev").click()
    old = message(page, 2)
    await expect(old).to_have_attribute("data-on-main", "false")
    await expect(old.locator('[data-testid="tool-call"]')).to_contain_text("glob")
    await expect(old.locator('[data-testid="message"][data-role="tool"]')).to_have_count(1)
    await expect(message(page, 4)).to_contain_text("All tools were called")
    await expect(message(page, new_branch)).to_have_count(0)

    await page.locator('[data-testid="branch-switch"] button.next').click()
    await expect(message(page, new_branch)).to_have_attribute("data-on-main", "true")
    await expect(message(page, 2)).to_have_count(0)
    # side panels are there, the timeline lists the model and tool calls of the shown path
    await expect(page.locator('[data-testid="goal-tree"]')).to_be_visible()
    # what the plan cost: the automatic root goal holds every model call of both branches
    root_cost = page.locator('[data-goal-id="root"] > [data-testid="goal-cost"]')
    await expect(root_cost).to_contain_text("4 calls")
    await expect(page.locator('[data-testid="subtraces"]')).to_be_visible()
    steps = page.locator('[data-testid="timeline"] li')
    await expect(steps.first).to_have_attribute("data-kind", "model")
    await expect(page.locator('[data-testid="totals"]')).to_contain_text("completion tokens")
    await expect(page.locator('[data-testid="totals"]')).to_contain_text("saved by compaction")


async def test_a_rewind_started_from_the_page(stack: RunningGateway, page: Page) -> None:
    trace = await opened(stack, page, "first try")
    await expect(message(page, 2)).to_contain_text("Last request: first try")
    await message(page, 1).locator('[data-testid="rewind"]').click()
    await expect(page.locator('[data-testid="rewind-note"]')).to_contain_text("#1")
    await page.fill('[data-testid="composer"]', "second try")
    await page.click('[data-testid="send"]')

    answer = page.locator('[data-testid="message"][data-role="assistant"]')
    await expect(answer).to_contain_text("Last request: second try")
    await expect(page.locator('[data-testid="branch-switch"]')).to_have_count(1)
    async with stack.client() as http:
        path = (await http.get(f"/api/traces/{trace}/messages")).json()["messages"]
    assert [m["content"] for m in path if m["role"] == "user"] == ["first try", "second try"]
    assert path[1]["parent_sequence"] == 1 and path[1]["sequence"] == 3


async def test_live_tokens_arrive_while_the_answer_is_written(
    stack: RunningGateway, page: Page
) -> None:
    await opened(stack, page, "hello")
    await expect(message(page, 2)).to_be_visible()
    await expect(page.locator('[data-testid="trace-page"]')).to_have_attribute(
        "data-stream", "open"
    )
    # record every text the live box shows, however briefly
    await page.evaluate("""() => {
        window.__live = [];
        const box = document.querySelector('[data-testid="live"]');
        new MutationObserver((records) => {
            for (const r of records)
                for (const n of r.addedNodes) window.__live.push(n.textContent);
        }).observe(box, { childList: true, subtree: true, characterData: true });
    }""")
    await page.fill('[data-testid="composer"]', "stream this")
    await page.click('[data-testid="send"]')
    await expect(message(page, 4)).to_contain_text("Last request: stream this")
    final = await message(page, 4).locator("pre.content").text_content()
    seen = [text for text in await page.evaluate("window.__live") if text]
    assert seen, "no token delta reached the page"
    longest = max(seen, key=len)
    assert final is not None and longest and final.startswith(longest)
    await expect(page.locator('[data-testid="live"]')).to_be_hidden()


async def test_reply_to_a_trace_waiting_for_a_person(stack: RunningGateway, page: Page) -> None:
    async with stack.client() as http:
        trace = await start(http, "ask me", model="scripted:auto", tools=["ask_human"])
        await until(http, trace, "waiting")
    await page.goto(f"{stack.url}/#/traces/{trace}")
    await expect(page.locator('[data-testid="wait"]')).to_contain_text("human")
    # the person waited on is a collaborator, as the model is told: name [type, status]
    await expect(
        page.locator('[data-testid="collaborators"] li[data-name="human"]')
    ).to_contain_text("[human, asked]")
    await page.fill('[data-testid="composer"]', "the answer is blue")
    await page.click('[data-testid="reply"]')
    await expect(
        page.locator('[data-testid="trace-title"] + .meta [data-testid="status"]')
    ).to_have_text("completed")
    await expect(page.locator('[data-testid="message"][data-role="tool"]')).to_contain_text(
        "the answer is blue"
    )
    # the timeline counts the wait for the person as the ask_human step's time
    asked = page.locator('[data-testid="timeline"] li[data-kind="tool"]')
    await expect(asked).to_contain_text("ask_human")
    assert int(await asked.get_attribute("data-ms") or 0) > 0
    # the controls go to the API, which decides: a refusal shows its message
    async with stack.client() as http:
        refused = await http.post(f"/api/traces/{trace}/stop")
    assert refused.status_code == 409
    await page.locator('[data-testid="stop"]').click()
    await expect(page.locator('[data-testid="error"]')).to_have_text(
        refused.json()["error"]["message"]
    )
    # delete, once confirmed: the viewer goes back to the list, the trace is unknown
    page.once("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    await page.locator('[data-testid="delete"]').click()
    await expect(page).to_have_url(f"{stack.url}/#/")
    async with stack.client() as http:
        assert (await http.get(f"/api/traces/{trace}")).status_code == 404


async def test_task_list_and_page_draw_the_phase_dag_and_resume(
    stack: RunningGateway, store: EventStore, page: Page
) -> None:
    async with stack.client() as http:
        task = (await http.post("/api/tasks", json={"goal": "ship the report"})).json()["task_id"]
    state = await task_state(store, task)
    await store.append(
        "task",
        task,
        [
            ev.PlanCreated(
                phases=[
                    ev.PhaseSpec(id="gather", name="gather"),
                    ev.PhaseSpec(
                        id="draft",
                        name="draft",
                        depends_on=["gather"],
                        competitors=[{"label": "a"}, {"label": "b"}],
                    ),
                    ev.PhaseSpec(id="figures", name="figures", depends_on=["gather"]),
                    ev.PhaseSpec(id="merge", name="merge", depends_on=["draft", "figures"]),
                ]
            ),
            ev.PhaseStarted(phase_id="gather", trace_ids=["t_step_gather"]),
            ev.PhaseCompleted(phase_id="gather", summary="found 3 sources"),
            ev.PhaseStarted(phase_id="draft", trace_ids=["t_step_draft"]),
            ev.PhaseFailed(phase_id="draft", error="draft step failed"),
            ev.TaskFailed(error="phase draft failed"),
        ],
        expected=Position(state.stream_seq, state.version),
        actor="planner:test",
    )
    await page.goto(f"{stack.url}/#/tasks")
    row = page.locator(f'[data-testid="task-row"][data-task-id="{task}"]')
    await expect(row).to_have_attribute("data-status", "failed")
    await expect(row).to_contain_text("1/4 phases")
    await row.locator("a").click()
    await expect(page.locator('[data-testid="task-title"]')).to_have_text("ship the report")
    phases = page.locator('[data-testid="phase"]')
    await expect(phases).to_have_count(4)
    statuses = await phases.evaluate_all(
        "ps => Object.fromEntries(ps.map(p => [p.dataset.phaseId, p.dataset.status]))"
    )
    assert statuses == {
        "gather": "completed",
        "draft": "failed",
        "figures": "pending",
        "merge": "pending",
    }
    depth = await phases.evaluate_all(
        "ps => Object.fromEntries(ps.map(p => [p.dataset.phaseId, "
        "p.closest('.dag-col').dataset.depth]))"
    )
    assert depth == {"gather": "0", "draft": "1", "figures": "1", "merge": "2"}
    edges = await page.locator('[data-testid="dag"] path.edge').evaluate_all(
        "es => es.map(e => e.dataset.from + '>' + e.dataset.to).sort()"
    )
    assert edges == ["draft>merge", "figures>merge", "gather>draft", "gather>figures"]
    await expect(
        page.locator('[data-phase-id="gather"] [data-testid="step-trace"]')
    ).to_have_attribute("href", "#/traces/t_step_gather")
    await expect(page.locator('[data-phase-id="draft"] [data-testid="competitors"]')).to_have_text(
        "2 competitors, merge: best"
    )
    await page.click('[data-testid="resume-task"]')
    async with asyncio.timeout(WAIT_MS / 1000):
        while True:
            async with stack.client() as http:
                view = (await http.get(f"/api/tasks/{task}")).json()
            if view["resumes"] == 1:
                break
            await asyncio.sleep(0.05)


async def test_a_plan_waiting_for_review_is_edited_in_the_viewer_and_approved(
    stack: RunningGateway, store: EventStore, page: Page
) -> None:
    async with stack.client() as http:
        task = (await http.post("/api/tasks", json={"goal": "g", "review": True})).json()
    task_id = task["task_id"]
    state = await task_state(store, task_id)
    proposed = [
        ev.PhaseSpec(
            id=pid,
            name=f"Phase {pid}",
            description=f"carry out phase {pid} completely",
            depends_on=deps,
            criteria=[f"{pid} done"],
        )
        for pid, deps in (("gather", []), ("draft", ["gather"]), ("extra", ["gather"]))
    ]
    await store.append(
        "task",
        task_id,
        [ev.PlanCreated(phases=proposed, source="model", review=True)],
        expected=Position(state.stream_seq, state.version),
        actor="planner:test",
    )
    await page.goto(f"{stack.url}/#/tasks/{task_id}")
    rows = page.locator('[data-testid="review-phase"]')
    await expect(rows).to_have_count(3)
    gather = page.locator('[data-testid="review-phase"][data-phase-id="gather"]')
    # a cycle is refused by the gateway and the refusal shown; nothing is appended
    await gather.locator('[data-field="depends_on"]').fill("draft")
    await page.click('[data-testid="approve-edited"]')
    await expect(page.locator('[data-testid="error"]')).to_contain_text("cycle")
    await gather.locator('[data-field="depends_on"]').fill("")
    await gather.locator('[data-field="description"]').fill("gather only the official sources")
    await (
        page.locator('[data-testid="review-phase"][data-phase-id="extra"]')
        .locator('[data-testid="remove-phase"]')
        .click()
    )
    await page.fill('[data-testid="review-reason"]', "extra is not needed")
    await page.click('[data-testid="approve-edited"]')
    await expect(page.locator('[data-testid="review"]')).to_have_count(0)
    events = [r.event async for r in store.replay("task", task_id)]
    [reviewed] = [e for e in events if isinstance(e, ev.PlanReviewed)]
    assert reviewed.approved and reviewed.reason == "extra is not needed"
    assert reviewed.phases is not None
    assert [(p.id, p.depends_on) for p in reviewed.phases] == [
        ("gather", []),
        ("draft", ["gather"]),
    ]
    assert reviewed.phases[0].description == "gather only the official sources"
    assert reviewed.phases[1].criteria == ["draft done"]


async def test_a_key_protected_gateway(nats_config: NatsConfig, page: Page) -> None:
    config = gateway_config(nats_config, api_keys=["viewer-key-1"])
    async with serve_gateway(config) as gateway:
        async with gateway.client("viewer-key-1") as http:
            trace = await start(http, "guarded", name="guarded run")
        await page.goto(gateway.url + "/")
        await expect(page.locator('[data-testid="error"]')).not_to_be_empty()
        await expect(page.locator('[data-testid="trace-row"]')).to_have_count(0)
        await page.fill("#api-key", "viewer-key-1")
        await page.press("#api-key", "Enter")
        await page.locator("#api-key").dispatch_event("change")
        await expect(page.locator(f'[data-trace-id="{trace}"]')).to_contain_text("guarded run")
        await page.click(f'[data-trace-id="{trace}"] a.trace-name')
        await expect(message(page, 1)).to_contain_text("guarded")
        await expect(page.locator('[data-testid="trace-page"]')).to_have_attribute(
            "data-stream", "open"
        )
        assert "viewer-key-1" not in page.url
        stored = await page.evaluate(
            "[sessionStorage.getItem('longhaul.apiKey'), localStorage.length]"
        )
        assert stored == ["viewer-key-1", 0]


async def test_a_compacted_range_is_folded_where_it_hangs(
    nats_config: NatsConfig, store: EventStore, page: Page
) -> None:
    def message_event(
        sequence: int,
        parent: int,
        role: Literal["system", "user", "assistant", "tool"],
        text: str,
        **extra: Any,
    ) -> Any:
        return ev.MessageAppended(
            sequence=sequence, parent_sequence=parent, role=role, content=text, **extra
        )

    async with written_trace(
        nats_config,
        store,
        "long job",
        message_event(2, 1, "assistant", "first steps"),
        message_event(3, 2, "user", "more work"),
        message_event(4, 3, "assistant", "old detail"),
        message_event(5, 2, "user", "summary of #3-#4", branch_type="compression"),
        message_event(6, 5, "assistant", "carrying on"),
        # the summariser's own round, on a side branch off the last summarised message
        message_event(7, 4, "user", "summarise", branch_type="compression", side_branch=True),
    ) as (gateway, trace):
        await page.goto(f"{gateway.url}/#/traces/{trace}")
        await expect(message(page, 6)).to_contain_text("carrying on")
        summary = message(page, 5)
        await expect(page.locator('[data-testid="branch-switch"]')).to_have_count(0)
        folded = summary.locator('[data-testid="compacted-range"]')
        await expect(folded).to_contain_text("#3\u2013#4 (2 messages)")
        await expect(folded.get_by_text("old detail")).to_be_hidden()
        await folded.locator("summary").click()
        await expect(folded.get_by_text("old detail")).to_be_visible()


async def test_a_long_trace_opens_at_its_last_page_and_loads_earlier_ones_on_demand(
    nats_config: NatsConfig, store: EventStore, page: Page
) -> None:
    """A trace with more messages than a page (issue 46): the page fetches only the last 200
    messages, shows them from the oldest of those, and "load earlier messages" fetches the
    200 before, until the first message is there and the control goes."""
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/messages" in r.url else None)
    steps = (
        ev.MessageAppended(sequence=n, parent_sequence=n - 1, role="assistant", content=f"step {n}")
        for n in range(2, 451)
    )
    async with written_trace(nats_config, store, "a long job", *steps) as (gateway, trace):
        await page.goto(f"{gateway.url}/#/traces/{trace}")
        await expect(message(page, 450)).to_contain_text("step 450")
        shown = page.locator('[data-testid="messages"] > [data-testid="message"]')
        await expect(shown).to_have_count(200)
        await expect(shown.first).to_have_attribute("data-sequence", "251")
        assert len(asked) == 1 and "limit=200" in asked[0] and "before=" in asked[0]

        earlier = page.locator('[data-testid="load-earlier"]')
        await earlier.click()
        await expect(shown).to_have_count(400)
        await expect(shown.first).to_have_attribute("data-sequence", "51")
        assert "before=251" in asked[-1] and "limit=200" in asked[-1]
        await earlier.click()
        await expect(shown).to_have_count(450)
        await expect(shown.first).to_contain_text("a long job")
        await expect(earlier).to_be_hidden()
        assert len(asked) == 3 and "before=51" in asked[-1]


async def test_regenerate_and_approve_from_the_page(stack: RunningGateway, page: Page) -> None:
    async with stack.client() as http:
        trace = await start(
            http,
            "list the files",
            model="scripted:auto",
            tools=["glob"],
            approval={"tools": ["glob"]},
        )
        await until(http, trace, "waiting")
    await page.goto(f"{stack.url}/#/traces/{trace}")
    approval = page.locator('[data-testid="approval"]')
    await expect(approval).to_contain_text("glob")
    await expect(page.locator('[data-testid="wait"]')).to_contain_text("approval")
    await approval.locator('[data-testid="approve"]').click()
    await expect(
        page.locator('[data-testid="trace-title"] + .meta [data-testid="status"]')
    ).to_have_text("completed")
    await expect(message(page, 4)).to_contain_text("All tools were called")
    await expect(approval).to_have_count(0)

    # regenerate the last answer: a second answer hangs under the same tool result
    await message(page, 4).locator('[data-testid="regenerate"]').click()
    switch = message(page, 5).locator('[data-testid="branch-switch"]')
    await expect(switch).to_have_attribute("data-count", "2")
    await expect(message(page, 5)).to_contain_text("All tools were called")
    await switch.locator("button.prev").click()
    await expect(message(page, 4)).to_have_attribute("data-on-main", "false")


async def test_a_cut_tool_output_is_shown_whole_on_request(
    stack: RunningGateway, page: Page, tmp_path: Path
) -> None:
    command = {"command": "seq 1 200000"}
    model = write_script(
        tmp_path / "seq.yaml",
        [
            {"tool_calls": [{"id": "c0", "name": "bash", "arguments": command}]},
            {"content": "counted"},
        ],
    )
    async with stack.client() as http:
        trace = await start(http, "count", model=model)
        await until(http, trace, "completed", "failed")
    await page.goto(f"{stack.url}/#/traces/{trace}")
    result = page.locator('[data-testid="message"][data-role="tool"]')
    await expect(result).to_contain_text("bytes in all")
    await expect(result).not_to_contain_text("150000")  # the model saw head and tail only
    button = page.locator('[data-testid="whole-output"]')
    await expect(button).to_have_count(1)
    await button.click()
    await expect(button).to_have_count(0)
    await expect(result).to_contain_text("150000")
    await expect(result).not_to_contain_text("bytes in all")


async def cut_off_payout(http: httpx.AsyncClient, store: EventStore) -> str:
    """A trace whose payout was cut off by a crash while it acted (the effect ledger's
    record, written as an executor would), waiting for a person to decide."""
    call = ToolCall(
        id="call_pay",
        function=FunctionCall(name="payout", arguments='{"amount": 50, "account": "a1"}'),
    )
    trace = await start(http, "pay out")
    await append_as_executor(
        store,
        trace,
        ev.MessageAppended(
            sequence=2, parent_sequence=1, role="assistant", content="", tool_calls=[call]
        ),
        ev.EffectStarted(
            tool_call_id="call_pay",
            tool="payout",
            idempotency_key=f"{trace}:call_pay",
            effects="unsafe",
        ),
        ev.EffectResumed(tool_call_id="call_pay", resolution="asked", detail="no hook"),
        ev.Waiting(
            reason="approval",
            detail="outcome unknown: payout call call_pay was cut off by a crash",
            pending_calls=["call_pay"],
        ),
    )
    # the index entry an executor would write on its way into the wait (the inbox reads it)
    await TraceIndex(store.conn).update(await trace_state(store, trace))
    return trace


async def decided_took_effect(store: EventStore, trace: str, reason: str) -> None:
    """The trace's one decision: the call took effect, with ``reason`` told to the model."""
    [decided] = [
        r.event async for r in store.replay("trace", trace) if r.event.type == "tool_decided"
    ]
    assert isinstance(decided, ev.ToolDecided)
    assert (decided.took_effect, decided.approved, decided.reason) == (True, False, reason)


async def test_an_outcome_unknown_call_is_shown_and_decided(
    nats_config: NatsConfig, store: EventStore, page: Page
) -> None:
    """A payout cut off by a crash while it acted (the effect ledger's record, written as an
    executor would): the page shows it, with its key and how it was resumed, and a person
    marks it done from the page, the composer's text being what the model is told."""
    # no executor: the trace keeps the state this test writes
    async with serve_gateway(gateway_config(nats_config)) as gateway:
        async with gateway.client() as http:
            trace = await cut_off_payout(http, store)
            key = f"{trace}:call_pay"
            await page.goto(f"{gateway.url}/#/traces/{trace}")
            unknown = page.locator('[data-testid="outcome-unknown"]')
            await expect(unknown).to_contain_text("payout")
            note = message(page, 2).locator('[data-testid="cut-off-effect"]')
            await expect(note).to_contain_text(key)
            await expect(note).to_contain_text("outcome unknown: waiting for a person")
            await page.fill('[data-testid="composer"]', "payout P-7 went through")
            await unknown.locator('[data-testid="took-effect"]').click()
            await expect(note).to_have_attribute("data-decision", "took_effect")
            await expect(note).to_contain_text("decided: it took effect")
            await expect(unknown).to_have_count(0)
            shown = (await http.get(f"/api/traces/{trace}")).json()
    await decided_took_effect(store, trace, "payout P-7 went through")
    assert shown["cut_off_effects"] == [
        {
            "tool_call_id": "call_pay",
            "tool": "payout",
            "effects": "unsafe",
            "idempotency_key": key,
            "resolutions": ["asked"],
            "decision": "took_effect",
            "settled": False,
        }
    ]


async def _scored_eval(
    http: httpx.AsyncClient,
    failing: set[tuple[str, int]],
    model: str = "scripted:auto",
    replay_of: str | None = None,
) -> str:
    """An eval of two tasks, twice each, on ``model``, scored as ``failing`` says (a failed
    run with its reason and a failed check); ``replay_of``: a replay of that eval."""
    suite = {"name": "view", "tasks": [{"id": "one", "prompt": "1"}, {"id": "two", "prompt": "2"}]}
    body: dict[str, Any] = {"suite": suite, "models": [model], "repeat": 2}
    if replay_of is not None:
        body = {"suite": suite, "replay_of": replay_of}
    created = await http.post("/api/evals", json=body)
    assert created.status_code == 201, created.text
    eval_id = str(created.json()["eval_id"])
    for task in ("one", "two"):
        for repeat in (0, 1):
            run = {"task": task, "model": model, "repeat": repeat}
            started = await http.post(f"/api/evals/{eval_id}/runs", json=run)
            passed = (task, repeat) not in failing
            score = {
                **run,
                "trace_id": started.json()["trace_id"],
                "status": "completed",
                "passed": passed,
                "tokens": 50,
                "output": f"answer of {task}#{repeat}",
                "ended_at": 1_790_000_000.0,
                "checks": [{"check": "contains 'x'", "passed": passed, "detail": "no x here"}],
                "reasons": [] if passed else ["contains 'x' failed: no x here"],
            }
            stored = await http.put(f"/api/evals/{eval_id}/runs", json=score)
            assert stored.status_code == 200, stored.text
    return eval_id


async def test_the_evals_pages_list_show_and_compare_two_runs(
    stack: RunningGateway, page: Page
) -> None:
    async with stack.client() as http:
        before = await _scored_eval(http, failing=set())
        after = await _scored_eval(http, failing={("one", 1)})
    await page.goto(f"{stack.url}/#/evals/{before}")
    await expect(page.get_by_test_id("eval-title")).to_contain_text(before)
    await expect(page.get_by_test_id("pass-bar")).to_contain_text("100% [")
    await expect(page.get_by_test_id("eval-run")).to_have_count(4)
    await page.get_by_test_id("eval-run").first.click()
    await expect(page).to_have_url(re.compile(r"#/traces/t_k"))  # a link to the run's trace

    await page.goto(f"{stack.url}/#/evals")
    rows = page.get_by_test_id("eval-row")
    await expect(rows).to_have_count(2)
    await page.locator(f'[data-eval-id="{before}"] [data-testid="eval-check"]').check()
    await page.locator(f'[data-eval-id="{after}"] [data-testid="eval-check"]').check()
    await page.get_by_test_id("compare").click()
    regression = page.get_by_test_id("regression")
    await expect(regression.first).to_contain_text("task one passed in every run before")
    await expect(page.locator(".eval-side").last.locator("tr.regressed")).to_have_attribute(
        "data-task", "one"
    )
    await expect(page.get_by_test_id("pass-bar")).to_have_count(2)


async def test_an_eval_shows_each_runs_output_checks_reason_date_and_a_replay_badge(
    stack: RunningGateway, page: Page
) -> None:
    async with stack.client() as http:
        recorded = await _scored_eval(http, failing={("two", 0)})
        replay = await _scored_eval(http, failing=set(), replay_of=recorded)
    await page.goto(f"{stack.url}/#/evals/{recorded}")
    details = page.get_by_test_id("eval-run-detail")
    await expect(details).to_have_count(4)
    failed = page.locator('[data-testid="eval-run-detail"][data-passed="false"]')
    await expect(failed).to_have_count(1)
    await expect(failed).to_have_attribute("data-task", "two")
    await expect(failed.get_by_test_id("run-reasons")).to_contain_text("no x here")
    await expect(failed.get_by_test_id("run-checks")).to_contain_text("✗ contains 'x'")
    await expect(failed.get_by_test_id("run-output")).to_contain_text("answer of two#0")
    await expect(failed.get_by_test_id("run-date")).to_contain_text("2026")
    await expect(page.get_by_test_id("eval-date")).not_to_be_empty()
    await expect(page.get_by_test_id("replay-badge")).to_have_count(0)

    await page.goto(f"{stack.url}/#/evals/{replay}")
    await expect(page.get_by_test_id("eval-title").get_by_test_id("replay-badge")).to_contain_text(
        f"replay of {recorded}"
    )
    await page.goto(f"{stack.url}/#/evals")
    row = page.locator(f'[data-eval-id="{replay}"]')
    await expect(row.get_by_test_id("replay-badge")).to_be_visible()


async def test_the_comparison_takes_the_older_as_before_and_says_when_models_differ(
    stack: RunningGateway, page: Page
) -> None:
    async with stack.client() as http:
        older = await _scored_eval(http, failing=set())
        newer = await _scored_eval(
            http, failing={("one", 0), ("one", 1), ("two", 0), ("two", 1)}, model="scripted:demo"
        )
    await page.goto(f"{stack.url}/#/evals")
    # the newer checked first: "before" is still the older
    await page.locator(f'[data-eval-id="{newer}"] [data-testid="eval-check"]').check()
    await page.locator(f'[data-eval-id="{older}"] [data-testid="eval-check"]').check()
    await page.get_by_test_id("compare").click()
    sides = page.locator(".eval-side h3")
    await expect(sides.first).to_contain_text(f"before view · {older}")
    await expect(sides.last).to_contain_text(f"after view · {newer}")
    await expect(page.get_by_test_id("models-differ")).to_contain_text(
        "before ran scripted:auto; after ran scripted:demo"
    )
    await expect(page.get_by_test_id("no-regression")).to_have_text(
        "no model ran in both: nothing compared"
    )
    # the same, reached by the link in the other order
    await page.goto(f"{stack.url}/#/evals/{newer}/vs/{older}")
    await expect(page.locator(".eval-side h3").first).to_contain_text(f"before view · {older}")


async def test_a_fork_with_another_model_is_compared_side_by_side(
    stack: RunningGateway, page: Page
) -> None:
    trace = await opened(stack, page, "first try")
    await expect(message(page, 2)).to_contain_text("Last request: first try")
    # rewind at the question with another model: the comparison opens on its own
    await message(page, 1).locator('[data-testid="rewind"]').click()
    await page.fill('[data-testid="fork-model"]', "scripted:auto?chunk=3")
    await page.fill('[data-testid="composer"]', "second try")
    await page.click('[data-testid="send"]')
    columns = page.locator('[data-testid="branch-column"]')
    await expect(columns).to_have_count(2)
    await expect(columns.nth(0)).to_have_attribute("data-models", "scripted:auto")
    await expect(columns.nth(1)).to_have_attribute("data-models", "scripted:auto?chunk=3")
    await expect(columns.nth(1).locator('[data-testid="branch-answer"]')).to_contain_text(
        "Last request: second try"
    )
    await expect(columns.nth(0).locator('[data-testid="branch-answer"]')).to_contain_text(
        "Last request: first try"
    )
    await expect(columns.nth(1)).to_have_attribute("data-calls", "1")
    async with stack.client() as http:
        path = (await http.get(f"/api/traces/{trace}/messages")).json()["messages"]
    assert [m["model"] for m in path if m["role"] == "assistant"] == ["scripted:auto?chunk=3"]
    # closed, and opened again from the branch switch
    await page.locator('[data-testid="branch-compare"] button').click()
    await expect(page.locator('[data-testid="branch-compare"]')).to_be_hidden()
    await page.locator('[data-testid="compare-branches"]').click()
    await expect(columns).to_have_count(2)


async def test_the_schedules_page_creates_pauses_runs_and_deletes(
    stack: RunningGateway, page: Page
) -> None:
    await page.goto(f"{stack.url}/#/schedules")
    await expect(page.get_by_test_id("schedule-list")).to_contain_text("no schedules yet")
    await page.get_by_test_id("schedule-name").fill("hourly digest")
    await page.get_by_test_id("schedule-prompt").fill("write the digest")
    await page.get_by_test_id("schedule-every").fill("3600")
    await page.get_by_test_id("schedule-create").click()
    row = page.get_by_test_id("schedule-row")
    await expect(row).to_have_count(1)
    await expect(row.get_by_test_id("schedule-state")).to_contain_text("every 3600 s · next 20")

    await row.get_by_test_id("schedule-toggle").click()
    await expect(row.get_by_test_id("schedule-state")).to_contain_text("paused")
    await row.get_by_test_id("schedule-run-now").click()
    run = page.get_by_test_id("schedule-run")
    await expect(run).to_have_count(1)
    run_id = await run.text_content()
    async with stack.client() as http:
        [listed] = (await http.get("/api/schedules")).json()["schedules"]
        assert listed["paused"] is True and listed["name"] == "hourly digest"
        trace = (await http.get(f"/api/traces/{run_id}")).json()
        assert trace["schedule_id"] == listed["schedule_id"]
    await run.click()
    await expect(page).to_have_url(re.compile(rf"#/traces/{run_id}$"))

    await page.goto(f"{stack.url}/#/schedules")
    await page.get_by_test_id("schedule-delete").click()
    await expect(page.get_by_test_id("schedule-list")).to_contain_text("no schedules yet")


async def test_the_inbox_page_counts_the_waits_and_answers_them_in_place(
    stack: RunningGateway, store: EventStore, page: Page, tmp_path: Path
) -> None:
    """A question and an approval from two traces, oldest first, with the count in the
    header; an edit that does not fit the tool's schema is refused and shown, a fitting one
    approved; the question answered in place."""
    ask = [
        {
            "tool_calls": [
                {"id": "c_ask", "name": "ask_human", "arguments": {"question": "Which colour?"}}
            ]
        }
    ]
    listing = [{"tool_calls": [{"id": "c_glob", "name": "glob", "arguments": {"pattern": "**/*"}}]}]
    async with stack.client() as http:
        asked = await start(
            http, "ask", model=write_script(tmp_path / "ask.yaml", [*ask, {"content": "ok"}])
        )
        await until(http, asked, "waiting")
        gated = await start(
            http,
            "list",
            model=write_script(tmp_path / "glob.yaml", [*listing, {"content": "listed"}]),
            approval={"tools": ["glob"]},
        )
        await until(http, gated, "waiting")
    await page.goto(f"{stack.url}/#/inbox")
    count = page.locator('[data-testid="inbox-count"]')
    await expect(count).to_have_text("2")
    items = page.locator('[data-testid="inbox-item"]')
    await expect(items).to_have_count(2)
    await expect(items.nth(0)).to_have_attribute("data-kind", "question")
    await expect(items.nth(0).locator('[data-testid="inbox-question"]')).to_have_text(
        "Which colour?"
    )
    gate = items.nth(1)
    await expect(gate.locator('[data-testid="inbox-tool"]')).to_have_text("glob")
    arguments = gate.locator('[data-testid="inbox-arguments"]')
    await arguments.fill('{"pattern": 5}')
    await gate.locator('[data-testid="inbox-approve"]').click()
    await expect(page.locator('[data-testid="error"]')).to_contain_text("schema")
    await arguments.fill('{"pattern": "*.txt"}')
    await gate.locator('[data-testid="inbox-approve"]').click()
    await expect(items).to_have_count(1)
    await expect(count).to_have_text("1")
    await items.nth(0).locator('[data-testid="inbox-answer"]').fill("blue")
    await items.nth(0).locator('[data-testid="inbox-reply"]').click()
    await expect(page.locator('[data-testid="inbox-empty"]')).to_be_visible()
    await expect(count).to_have_text("0")
    decided = [r.event async for r in store.replay("trace", gated)]
    assert [e.arguments for e in decided if isinstance(e, ev.ToolDecided)] == [{"pattern": "*.txt"}]
    replied = [r.event async for r in store.replay("trace", asked)]
    assert [e.content for e in replied if isinstance(e, ev.HumanReplied)] == ["blue"]


async def test_a_model_switch_is_a_line_in_the_transcript(
    nats_config: NatsConfig, store: EventStore, page: Page
) -> None:
    """A provider outage moved the trace to its fallback after message #2: the line stands
    between #2 and the first message the fallback wrote."""
    async with serve_gateway(gateway_config(nats_config)) as gateway:
        async with gateway.client() as http:
            trace = await start(http, "long job")
        switched = ev.ModelSwitched(
            from_model="openai:gpt-4o", to="anthropic:claude-x", reason="server_error"
        )
        await append_as_executor(
            store,
            trace,
            ev.MessageAppended(sequence=2, parent_sequence=1, role="assistant", content="step"),
            switched,
        )
        await page.goto(f"{gateway.url}/#/traces/{trace}")
        await expect(message(page, 2)).to_contain_text("step")
        line = page.locator('[data-testid="model-switch"]')
        await expect(line).to_have_text(
            "model switched: openai:gpt-4o → anthropic:claude-x (server_error)"
        )
        # arriving live: the next message follows the line
        await append_as_executor(
            store,
            trace,
            ev.MessageAppended(sequence=3, parent_sequence=2, role="assistant", content="more"),
        )
        await expect(message(page, 3)).to_contain_text("more")
        order = await page.locator(
            '[data-testid="messages"] > [data-testid="message"], [data-testid="model-switch"]'
        ).evaluate_all("(nodes) => nodes.map((n) => n.dataset.sequence || 'switch')")
        assert order == ["1", "2", "switch", "3"]


async def test_the_inbox_offers_an_outcome_unknown_call_its_own_choice(
    nats_config: NatsConfig, store: EventStore, page: Page
) -> None:
    """A call cut off by a crash is not a plain approval in the inbox: run it again, or say
    whether it took effect (with what happened, told to the model)."""
    async with serve_gateway(gateway_config(nats_config)) as gateway:
        async with gateway.client() as http:
            trace = await cut_off_payout(http, store)
            await page.goto(f"{gateway.url}/#/inbox")
            item = page.locator('[data-testid="inbox-item"]')
            await expect(item).to_have_attribute("data-outcome-unknown", "true")
            await expect(item.locator('[data-testid="inbox-outcome-unknown"]')).to_contain_text(
                "payout"
            )
            await expect(item.locator('[data-testid="inbox-approve"]')).to_have_count(0)
            await expect(item.locator('[data-testid="inbox-run-again"]')).to_be_visible()
            await expect(item.locator('[data-testid="inbox-did-not"]')).to_be_visible()
            await item.locator('[data-testid="inbox-reason"]').fill("payout P-7 went through")
            await item.locator('[data-testid="inbox-took-effect"]').click()
            await expect(page.locator('[data-testid="inbox-empty"]')).to_be_visible()
    await decided_took_effect(store, trace, "payout P-7 went through")


async def test_a_completed_traces_root_goal_is_shown_done(
    stack: RunningGateway, page: Page
) -> None:
    """The root goal ends with the trace: once it completed, the goal panel says done and
    nothing is left in focus (it read IN_PROGRESS ◀ focus)."""
    await opened(stack, page, "say hello")
    root = page.locator('[data-testid="goal-tree"] [data-goal-id="root"]')
    await expect(root).to_have_attribute("data-status", "done")
    await expect(root.locator(":scope > .goal-status")).to_have_text("done")
    await expect(page.locator('[data-testid="goal-tree"] .focus-mark')).to_have_count(0)


async def test_a_rewind_into_the_demos_plan_lists_each_goal_once(
    stack: RunningGateway, page: Page
) -> None:
    """Rewound from the page into the survey (its goals still open) and asked
    again, ``scripted:demo`` carries its plan on: the goal panel lists each goal once, done
    (it listed the plan twice, the first copy left pending)."""
    ask = "what is in my workdir?"
    async with stack.client() as http:
        trace = await start(http, ask, model="scripted:demo?latency_ms=0")
        await until(http, trace, "completed")
        ended = (await http.get(f"/api/traces/{trace}")).json()["event_id"]
    await page.goto(f"{stack.url}/#/traces/{trace}")
    # #6 focuses g1 and lists the files: the rewind keeps its results (#7, #8)
    await message(page, 6).locator('[data-testid="rewind"]').first.click()
    await expect(page.locator('[data-testid="rewind-note"]')).to_contain_text("#6")
    await page.fill('[data-testid="composer"]', ask)
    await page.click('[data-testid="send"]')

    async with stack.client() as http:
        await until(http, trace, "completed", after=ended)
    goals = page.locator('[data-testid="goal-tree"] li.goal[data-goal-id^="g"]')
    await expect(goals).to_have_count(3)
    for goal_id in ("g1", "g2", "g3"):
        done = page.locator(f'[data-testid="goal-tree"] [data-goal-id="{goal_id}"]')
        await expect(done).to_have_attribute("data-status", "done")


async def test_the_usage_page_charts_the_days_and_lists_what_was_spent(
    stack: RunningGateway, page: Page
) -> None:
    await page.goto(f"{stack.url}/#/usage")
    await expect(page.get_by_test_id("usage-empty")).to_have_text("nothing spent")
    async with stack.client() as http:
        trace = await start(http, "spend something", model="scripted:auto", tools=[])
        await until(http, trace, "completed")

        async def counted() -> dict[str, Any] | None:  # the turn's end counts it
            usage = (await http.get("/api/usage", params={"group_by": "day,model"})).json()
            return usage if usage["rows"] else None

        usage = await eventually(counted, within=30.0)
    [row] = usage["rows"]
    await page.goto(f"{stack.url}/#/")
    await page.get_by_test_id("usage-link").click()
    await expect(
        page.locator(f'[data-testid="usage-day"][data-day="{row["day"]}"]')
    ).to_be_visible()
    await page.get_by_test_id("usage-measure").select_option("tokens")
    await expect(page.get_by_test_id("usage-chart")).to_contain_text(f"{row['tokens']:,} tokens")
    await expect(page.get_by_test_id("usage-row")).to_contain_text(row["model"])
    await expect(page.get_by_test_id("usage-total")).to_contain_text(f"{row['tokens']:,}")
