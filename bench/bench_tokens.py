"""Token economy (issue 21): what loop detection, offloading, compaction and prompt caching save
on long-horizon workloads, counted with a real tokenizer and priced by the providers' rules.

Three scripted workloads run through the real engine (default middleware chain, the built-in
tools on a real working directory, ``bash`` in its sandbox, an in-memory workspace, the real
fold) under six configurations: naive (every saving off), each saving alone, and all on:

- **loop**: a model that retries an identical failing call (a missing file) and changes
  strategy only when told it is repeating itself; without loop detection it repeats until the
  iteration limit and never finishes the task;
- **long task**: ``GOALS`` goals of about eleven steps each (a goal per service: read the
  source, grep, ``cat`` a large log, grep and tail it, read the docs and tests), each goal
  closed with a summary of the fact it found; the fact sits in the middle of the log, where an
  offloaded output leaves it out, so finding it may need ``workspace_read``. The model reads
  facts only from what its request shows; success: the final answer names every fact;
- **conversation**: a multi-turn chat (a file read and an answer per turn) with continues and
  a rewind, spanning an hour boundary of the simulated clock.

The agent's side is scripted but reactive (it only knows what its requests show); the rest is
the product. Every request the model (and the summariser) received is encoded by the OpenAI
codec, rendered by the real llama.cpp server (``/apply-template``, the packaged SmolLM2's
tools-aware template) and counted with its tokenizer (``/tokenize``). Cache effects follow the
providers' published rules: **OpenAI** caches the longest prefix shared with an earlier
request, from 1,024 tokens in 128-token steps, billed at 0.25x (gpt-4.1); **Anthropic** reads
the longest prefix cached at a breakpoint of an earlier request (the codec's breakpoints:
tools+system and the last two user turns; 5-minute TTL on the simulated clock, refreshed on a
hit; at least 1,024 tokens), reads billed 0.1x, writes 1.25x. With caching off nothing is
billed as cached. The all-on conversation is then replayed on the real llama.cpp server
(``cache_prompt``): its ``cached_tokens`` must show the reused prefix.

Columns: calls (model and summariser requests), input tokens and x naive, OpenAI cached tokens
and effective cost x naive, Anthropic cache reads and writes and cost x naive, task success.
Last line: ``token economy: all-on effective input cost R x naive``: per provider the mean over
the workloads of all-on's cost x naive, and R the worse of the two providers.

    python -m bench.bench_tokens [--quick]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``bench.common`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from longhaul.agent import AgentEnv, Engine, default_middleware
from longhaul.agent.guardrail_policy import GuardrailPolicy
from longhaul.agent.tools.builtin import builtin_tools
from longhaul.agent.tools.settings import ToolSettings
from longhaul.agent.workdir import trace_home
from longhaul.core import event_loop
from longhaul.domain import events as ev
from longhaul.domain.config import (
    MiddlewareEntry,
    OffloadConfig,
    PipelineConfig,
    PromptCacheConfig,
)
from longhaul.domain.messages import content_text
from longhaul.domain.state import TraceState
from longhaul.llm.providers.openai import OpenAICodec
from longhaul.llm.scripted import ScriptedModel
from longhaul.llm.types import ModelRequest, ModelResponse, ToolCall

from bench.common import console, report
from tests.support.llama import LlamaProcess

SAVINGS = ("loop", "offload", "compaction", "caching")
CONFIGS: dict[str, frozenset[str]] = {
    "naive": frozenset(),
    **{f"{saving} only": frozenset({saving}) for saving in SAVINGS},
    "all on": frozenset(SAVINGS),
}
CONTEXT_LIMIT = 32_768
"""The simulated model's window: level-2 compaction starts at 80 % of it, which one goal's raw
outputs cross. Configurations that keep every output send requests far larger than that: their
counts are what they would send (a real 32k model would refuse them)."""
STEP_S = 8.0
"""Simulated seconds per model call; a person takes ``THINK_S`` between conversation turns."""
THINK_S = 75.0
START = datetime(2026, 3, 2, 9, 52, tzinfo=UTC)
"""The simulated clock starts shortly before an hour boundary, which the runs cross."""

OPENAI_MIN, OPENAI_STEP, OPENAI_READ = 1024, 128, 0.25
ANTHROPIC_MIN, ANTHROPIC_READ, ANTHROPIC_WRITE, ANTHROPIC_TTL_S = 1024, 0.1, 1.25, 300.0
ANTHROPIC_LOOKBACK = 20
"""Blocks Anthropic looks back from a breakpoint for an earlier cache entry."""


# --------------------------------------------------------------------------- running


class SimClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> datetime:
        return START + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t


class DictWorkspace:
    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    async def get(self, key: str) -> bytes | None:
        return self.values.get(key)

    async def put(self, key: str, value: bytes) -> None:
        self.values[key] = value


@dataclass
class Call:
    request: ModelRequest
    at: float
    purpose: str


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)
    success: bool = False
    detail: str = ""
    ends: list[str] = field(default_factory=list)


class FoldingSink:
    """The executor's sink minus the log: each event goes through the real fold."""

    def __init__(self, state: TraceState) -> None:
        self.state = state

    async def emit(self, events: Sequence[ev.TraceEvent]) -> None:
        for event in events:
            event.aggregate_id = self.state.trace_id
            self.state.apply(event)


Agent = Callable[[ModelRequest, str], ModelResponse]
"""The scripted side: the request and its text (everything the model is shown)."""


def request_text(request: ModelRequest) -> str:
    parts = [request.system_stable, request.system_volatile]
    for message in request.messages:
        parts.append(content_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            parts.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(parts)


def summarise(request: ModelRequest) -> ModelResponse:
    """The bench's summariser (level-2 compaction): keeps every line that states a fact or a
    finished goal and the last task statement. A stand-in for the utility model."""
    text = request_text(request)
    keep = [line for line in text.splitlines() if "FACT-" in line or "goal" in line.lower()]
    return ModelResponse(content="\n".join(dict.fromkeys(keep[-80:])) or "(nothing yet)")


class Harness:
    """One workload under one configuration: engine, clock, recorded calls."""

    def __init__(self, savings: frozenset[str], workdir: Path, max_iterations: int) -> None:
        entries = []
        if "loop" not in savings:
            entries.append(MiddlewareEntry(name="LoopDetection", enabled=False))
        if "compaction" not in savings:
            entries.append(MiddlewareEntry(name="Summarization", enabled=False))
        config = PipelineConfig(
            middleware=entries,
            prompt_cache=PromptCacheConfig(enable="caching" in savings),
            offload=OffloadConfig(enable="offload" in savings),
            max_iterations=max_iterations,
        )
        self.clock = SimClock()
        self.workspace = DictWorkspace()
        settings = ToolSettings() if "offload" in savings else ToolSettings(output_cap=10**9)
        env = AgentEnv(
            workspace=self.workspace,
            working_root=workdir,
            tool_settings=settings,
            clock=self.clock.monotonic,
            now=self.clock.now,
        )
        # without offloading, nothing caps an output either (the guardrail's cap included)
        guardrail = None if "offload" in savings else GuardrailPolicy(output_cap=10**9)
        middleware = default_middleware(
            config, guardrail=guardrail, context_limit=lambda model: CONTEXT_LIMIT
        )
        self.engine = Engine(tools=builtin_tools(), config=config, env=env, middleware=middleware)
        self.run = Run()

    def models(self, agent: Agent) -> tuple[ScriptedModel, ScriptedModel]:
        def main(request: ModelRequest) -> ModelResponse:
            self.clock.t += STEP_S
            self.run.calls.append(Call(request, self.clock.t, "agent"))
            response = agent(request, request_text(request))
            # unique call ids, as a model gives (compaction shortens the history, so a
            # count of its messages would repeat one and the effect ledger resume it)
            for n, tool_call in enumerate(response.tool_calls):
                tool_call.id = f"call_{len(self.run.calls)}_{n}"
            return response

        def utility(request: ModelRequest) -> ModelResponse:
            self.clock.t += STEP_S
            self.run.calls.append(Call(request, self.clock.t, "summary"))
            return summarise(request)

        return ScriptedModel(main, name="scripted:bench"), ScriptedModel(
            utility, name="scripted:bench"
        )

    async def turn(self, state: TraceState, agent: Agent) -> str:
        model, utility = self.models(agent)
        outcome = await self.engine.run_turn(
            state, FoldingSink(state), model=model, utility_model=utility
        )
        self.run.ends.append(outcome.end)
        return outcome.end


TRACE_IDS = {"loop": "t_loop", "long task": "t_long", "conversation": "t_chat"}


def new_trace(trace_id: str, task: str) -> TraceState:
    state = TraceState()
    state.apply(
        ev.TraceCreated(
            aggregate_id=trace_id, messages=[ev.InputMessage(role="user", content=task)]
        )
    )
    return state


def call(name: str, **arguments: Any) -> ModelResponse:
    return ModelResponse(
        tool_calls=[ToolCall.of(id="", name=name, arguments=json.dumps(arguments))]
    )


def answer(text: str) -> ModelResponse:
    return ModelResponse(content=text)


# --------------------------------------------------------------------------- workloads


def lorem(seed: int, words: int) -> str:
    vocabulary = (
        "request handler retry budget cache shard lease replica queue commit offset window "
        "token cursor backoff deadline payload schema index tenant quota metric span"
    ).split()
    return " ".join(vocabulary[(seed * 7 + i * 13) % len(vocabulary)] for i in range(words))


def fact_value(goal: int) -> str:
    return f"{(goal * 2654435761) % 16**8:08x}"


def write_repo(root: Path, goals: int) -> None:
    """Sources, docs, tests and logs of ``goals`` services, each log hiding one fact."""
    for g in range(1, goals + 1):
        (root / "src").mkdir(parents=True, exist_ok=True)
        (root / "docs").mkdir(exist_ok=True)
        (root / "logs").mkdir(exist_ok=True)
        source = [f"# service {g}"]
        for i in range(260):
            source.append(f"def handle_{g}_{i}(request):  # {lorem(g + i, 9)}")
            source.append(f"    return route(request, shard={i % 17}, retries={i % 5})")
        (root / f"src/service_{g}.py").write_text("\n".join(source) + "\n")
        tests = [
            f"def test_service_{g}_{i}():\n    assert handle_{g}_{i}(None)" for i in range(120)
        ]
        (root / f"src/test_service_{g}.py").write_text("\n".join(tests) + "\n")
        docs = [f"## service {g} section {i}\n{lorem(g * i, 60)}" for i in range(25)]
        (root / f"docs/service_{g}.md").write_text("\n\n".join(docs) + "\n")
        log = []
        for i in range(1400):
            level = "WARN" if i % 23 == 0 else "INFO"
            log.append(f"2026-03-02T09:{i % 60:02d}:{i % 59:02d}Z {level} svc{g} {lorem(i, 6)}")
        log.insert(700, f"2026-03-02T09:31:07Z INFO svc{g} root cause FACT-{g}: {fact_value(g)}")
        (root / f"logs/service_{g}.log").write_text("\n".join(log) + "\n")
    (root / "conf").mkdir(exist_ok=True)
    (root / "conf/settings.yaml").write_text("retries: 7\ntimeout_s: 30\n")


FACT = re.compile(r"FACT-(\d+): ([0-9a-f]{8})")
KEY = re.compile(r"workspace_read\(key='([^']+)'")
OMITTED = re.compile(r"(\d+) bytes omitted here between the first and the last (\d+)")


class LongTask:
    """The long task's agent: a fixed plan per goal, then the search for the goal's fact."""

    def __init__(self, goals: int) -> None:
        self.goals = goals
        self.plan: list[tuple[int, str, dict[str, Any]]] = []
        for g in range(1, goals + 1):
            log = f"logs/service_{g}.log"
            self.plan += [
                (g, "goal", {"op": "add", "title": f"find the root cause in svc{g}"}),
                (g, "goal", {"op": "focus", "goal_id": f"g{g}"}),
                (g, "read", {"path": f"src/service_{g}.py"}),
                (g, "grep", {"pattern": f"def handle_{g}_1", "path": "src"}),
                (g, "bash", {"command": f"cat {log}"}),
                (g, "bash", {"command": f"grep -n WARN {log}"}),
                (g, "read", {"path": f"docs/service_{g}.md"}),
                (g, "bash", {"command": f"tail -n 150 {log}"}),
                (g, "read", {"path": f"src/test_service_{g}.py"}),
                (g, "find", {}),
                (g, "close", {}),
            ]
        self.position = 0
        self.pages: dict[int, int] = {}

    def find(self, text: str, g: int) -> ModelResponse | None:
        """The fact if the request shows it; else page through the stored log output."""
        if any(int(n) == g for n, _ in FACT.findall(text)):
            return None
        keys = KEY.findall(text)
        omitted = OMITTED.findall(text)
        if not keys or not omitted:
            return None  # nowhere to look: the goal will close without its fact
        page = self.pages.get(g, 0)
        self.pages[g] = page + 1
        half = int(omitted[-1][1])
        length = 20_000
        self.position -= 1  # come back here after the read
        if page * length > int(omitted[-1][0]):
            self.position += 1
            return None
        return call("workspace_read", key=keys[-1], offset=half + page * length, length=length)

    def close(self, text: str, g: int) -> ModelResponse:
        found = dict(FACT.findall(text))
        value = found.get(str(g), "not found")
        return call("goal", op="done", goal_id=f"g{g}", summary=f"svc{g}: FACT-{g}: {value}")

    def __call__(self, request: ModelRequest, text: str) -> ModelResponse:
        while self.position < len(self.plan):
            g, name, arguments = self.plan[self.position]
            self.position += 1
            if name == "find":
                response = self.find(text, g)
            elif name == "close":
                response = self.close(text, g)
            else:
                response = call(name, **arguments)
            if response is not None:
                return response
        found = dict(FACT.findall(text))
        lines = [f"FACT-{g}: {found.get(str(g), 'unknown')}" for g in range(1, self.goals + 1)]
        return answer("Root causes:\n" + "\n".join(lines))


def long_task_succeeded(state: TraceState, goals: int) -> tuple[bool, str]:
    final = state.messages[state.path[-1]]
    text = content_text(final.content) if final.role == "assistant" else ""
    found = dict(FACT.findall(text))
    right = sum(found.get(str(g)) == fact_value(g) for g in range(1, goals + 1))
    return right == goals, f"{right}/{goals} facts in the final answer"


async def long_task(harness: Harness, goals: int) -> None:
    agent = LongTask(goals)
    state = new_trace(
        TRACE_IDS["long task"],
        f"Services svc1..svc{goals} fail at night. For each, find the root cause (a FACT line "
        "in its log) and report all of them.",
    )
    await harness.turn(state, agent)
    harness.run.success, harness.run.detail = long_task_succeeded(state, goals)


class Looper:
    """Retries the same failing read until told it is repeating itself, then looks around."""

    def __init__(self) -> None:
        self.warned = False
        self.step = 0

    def __call__(self, request: ModelRequest, text: str) -> ModelResponse:
        last = content_text(request.messages[-1].get("content")) if request.messages else ""
        if "You are repeating" in last:
            self.warned = True
        if not self.warned:
            return call("read", path="config/settings.yaml")
        self.step += 1
        if self.step == 1:
            return call("glob", pattern="**/*.yaml")
        if self.step == 2:
            return call("read", path="conf/settings.yaml")
        match = re.search(r"retries: (\d+)", text)
        return answer(f"retries is {match.group(1) if match else 'unknown'}")


async def loop_task(harness: Harness) -> None:
    state = new_trace(TRACE_IDS["loop"], "How many retries does config/settings.yaml configure?")
    await harness.turn(state, Looper())
    final = state.messages[state.path[-1]]
    harness.run.success = final.role == "assistant" and "retries is 7" in str(final.content)
    harness.run.detail = harness.run.ends[-1]


class Chatter:
    """One conversation turn: read the file the question names, then answer from it."""

    def __init__(self, turn: int) -> None:
        self.turn = turn

    def __call__(self, request: ModelRequest, text: str) -> ModelResponse:
        last = request.messages[-1] if request.messages else {}
        if last.get("role") == "user":
            return call("read", path=f"docs/service_{self.turn % 4 + 1}.md", limit=12)
        return answer(f"Turn {self.turn}: " + lorem(self.turn, 120))


async def conversation(harness: Harness, turns: int) -> None:
    state = new_trace(
        TRACE_IDS["conversation"], "Let's go through the service docs together. " + lorem(0, 40)
    )
    rewind_at = turns // 2
    cut: int | None = None
    for t in range(turns):
        if t:
            harness.clock.t += THINK_S
            question = ev.InputMessage(role="user", content=f"Question {t}: " + lorem(t, 30))
            after = None
            if t == rewind_at + 2 and cut is not None:  # go back and ask differently
                after = cut
                question = ev.InputMessage(
                    role="user", content=f"Rewound, question {t}: " + lorem(t, 30)
                )
            state.apply(
                ev.RunRequested(
                    aggregate_id=state.trace_id, messages=[question], after_sequence=after
                )
            )
        await harness.turn(state, Chatter(t))
        if t == rewind_at:
            cut = state.head_sequence
    harness.run.success = all(end == "completed" for end in harness.run.ends)
    harness.run.detail = (
        f"{len(harness.run.ends)} turns, {harness.run.ends.count('completed')} completed"
    )


# --------------------------------------------------------------------------- counting

CODEC = OpenAICodec(prompt_cache_key=False)
SEGMENT = "<|im_start|>"


@dataclass
class Prompt:
    """One request as the model's tokenizer sees it: chat-template segments (one per turn;
    special tokens never merge across them) with their token ids."""

    at: float
    segments: list[tuple[str, tuple[int, ...]]]
    breakpoints: list[int]
    """Anthropic: token positions carrying ``cache_control`` (empty with caching off)."""
    body: dict[str, Any]

    @property
    def tokens(self) -> int:
        return sum(len(ids) for _, ids in self.segments)


class Tokenizer:
    """The real llama.cpp server's template and tokenizer, with a cache per segment text."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.cache: dict[str, tuple[int, ...]] = {}

    async def ids(self, text: str) -> tuple[int, ...]:
        if text not in self.cache:
            response = await self.client.post("/tokenize", json={"content": text})
            response.raise_for_status()
            self.cache[text] = tuple(response.json()["tokens"])
        return self.cache[text]

    async def prompt(self, recorded: Call) -> Prompt:
        request = recorded.request
        body = CODEC.build("bench", request).body
        rendered = await self.client.post(
            "/apply-template", json={"messages": body["messages"], "tools": body.get("tools")}
        )
        rendered.raise_for_status()
        text: str = rendered.json()["prompt"]
        pieces = text.split(SEGMENT)
        texts = [pieces[0]] if pieces[0] else []
        texts += [SEGMENT + piece for piece in pieces[1:]]
        segments = [(piece, await self.ids(piece)) for piece in texts]
        breakpoints = anthropic_breakpoints(segments, request) if request.cache_system else []
        return Prompt(recorded.at, segments, breakpoints, body)


def _role(segment: str) -> str:
    return segment.removeprefix(SEGMENT).split("\n", 1)[0]


def anthropic_breakpoints(
    segments: list[tuple[str, tuple[int, ...]]], request: ModelRequest
) -> list[int]:
    """The Anthropic codec's breakpoints as token positions: after tools + system, and after
    the last two user turns (a run of user and tool-result segments), the context note
    (appended after every breakpoint) and the generation prompt left out."""
    ends: list[int] = []
    position = 0
    roles = [_role(text) for text, _ in segments]
    body = len(segments) - 1  # the trailing "<|im_start|>assistant\n" generation prompt
    if request.system_volatile:
        body -= 1  # the context note
    for index in range(body):
        position += len(segments[index][1])
        if index == 0 and roles[0] == "system":
            ends.append(position)
        elif roles[index] == "user" and (index + 1 == body or roles[index + 1] != "user"):
            ends.append(position)
    system, users = ends[:1], ends[1:]
    return system + users[-2:]


def common_prefix(a: Prompt, b: Prompt) -> int:
    total = 0
    for (text_a, ids_a), (text_b, ids_b) in zip(a.segments, b.segments, strict=False):
        if text_a == text_b:
            total += len(ids_a)
            continue
        for x, y in zip(ids_a, ids_b, strict=False):
            if x != y:
                break
            total += 1
        break
    return total


@dataclass
class Priced:
    input: int = 0
    openai_cached: int = 0
    openai_cost: float = 0.0
    anthropic_read: int = 0
    anthropic_written: int = 0
    anthropic_cost: float = 0.0
    requests: int = 0


def price(prompts: list[Prompt], caching: bool) -> Priced:
    priced = Priced()
    anthropic_cache: dict[tuple[int, ...], float] = {}  # prefix -> expiry (simulated s)
    for index, prompt in enumerate(prompts):
        tokens = prompt.tokens
        priced.requests += 1
        priced.input += tokens
        if not caching:
            priced.openai_cost += tokens
            priced.anthropic_cost += tokens
            continue
        shared = max((common_prefix(prompt, earlier) for earlier in prompts[:index]), default=0)
        cached = shared // OPENAI_STEP * OPENAI_STEP if shared >= OPENAI_MIN else 0
        cached = min(cached, tokens - 1) if cached else 0
        priced.openai_cached += cached
        priced.openai_cost += tokens - cached + cached * OPENAI_READ
        read, written = anthropic(prompt, anthropic_cache)
        priced.anthropic_read += read
        priced.anthropic_written += written
        priced.anthropic_cost += (
            tokens - read - written + read * ANTHROPIC_READ + written * ANTHROPIC_WRITE
        )
    return priced


def _flat(prompt: Prompt) -> tuple[int, ...]:
    return tuple(token for _, ids in prompt.segments for token in ids)


def anthropic(prompt: Prompt, cache: dict[tuple[int, ...], float]) -> tuple[int, int]:
    """Tokens read from and written to Anthropic's cache by one request: the longest prefix
    ending at a segment boundary (within the lookback of a breakpoint) that an earlier
    breakpoint wrote and has not expired; then everything up to the last breakpoint is
    written (if it is long enough to cache)."""
    if not prompt.breakpoints:
        return 0, 0
    flat = _flat(prompt)
    boundaries: list[int] = []
    position = 0
    for _, ids in prompt.segments:
        position += len(ids)
        boundaries.append(position)
    read = 0
    for breakpoint in prompt.breakpoints:
        block = boundaries.index(breakpoint) if breakpoint in boundaries else len(boundaries)
        for candidate in reversed(boundaries[max(0, block - ANTHROPIC_LOOKBACK) : block + 1]):
            if candidate <= breakpoint and cache.get(flat[:candidate], -1.0) >= prompt.at:
                read = max(read, candidate)
                cache[flat[:candidate]] = prompt.at + ANTHROPIC_TTL_S
                break
    last = prompt.breakpoints[-1]
    written = 0
    if last >= ANTHROPIC_MIN and last > read:
        written = last - read
    for breakpoint in prompt.breakpoints:
        if breakpoint >= ANTHROPIC_MIN:
            cache[flat[:breakpoint]] = prompt.at + ANTHROPIC_TTL_S
    return read, written


async def confirm_on_llama(client: httpx.AsyncClient, prompts: list[Prompt]) -> list[list[Any]]:
    """Replay requests on the real server (``cache_prompt``, one slot): its ``cached_tokens``
    against the prefix each request shares with the one before."""
    rows: list[list[Any]] = []
    previous: Prompt | None = None
    for index, prompt in enumerate(prompts):
        body = {
            "messages": prompt.body["messages"],
            "tools": prompt.body.get("tools"),
            "max_tokens": 1,
            "temperature": 0,
            "cache_prompt": True,
        }
        response = await client.post("/v1/chat/completions", json=body, timeout=600)
        response.raise_for_status()
        usage = response.json()["usage"]
        cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        shared = common_prefix(prompt, previous) if previous else 0
        rows.append([index + 1, usage["prompt_tokens"], prompt.tokens, shared, cached])
        previous = prompt
    return rows


# --------------------------------------------------------------------------- main


@dataclass
class Outcome:
    workload: str
    config: str
    run: Run
    prompts: list[Prompt]
    priced: Priced


async def measure(
    tokenizer: Tokenizer, workload: str, config: str, savings: frozenset[str], quick: bool
) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="lh-bench-tokens-") as tmp:
        root = Path(tmp)
        goals = 6 if quick else 10
        # the tools work in the trace's own directory below the working root
        write_repo(trace_home(root, new_trace(TRACE_IDS[workload], "")), goals)
        if workload == "loop":
            harness = Harness(savings, root, max_iterations=40)
            await loop_task(harness)
        elif workload == "long task":
            harness = Harness(savings, root, max_iterations=goals * 16 + 5)
            await long_task(harness, goals)
        else:
            harness = Harness(savings, root, max_iterations=10)
            await conversation(harness, 10 if quick else 16)
    prompts = [await tokenizer.prompt(recorded) for recorded in harness.run.calls]
    return Outcome(workload, config, harness.run, prompts, price(prompts, "caching" in savings))


def table(workload: str, outcomes: list[Outcome]) -> tuple[float, float]:
    """Print one workload's table; return all-on's OpenAI and Anthropic cost x naive."""
    naive = outcomes[0].priced
    rows = []
    notes = []
    for outcome in outcomes:
        p = outcome.priced
        summaries = sum(call.purpose == "summary" for call in outcome.run.calls)
        rows.append(
            [
                outcome.config,
                p.requests,
                p.input,
                f"{p.input / naive.input:.2f}",
                p.openai_cached,
                f"{p.openai_cost / naive.openai_cost:.2f}",
                p.anthropic_read,
                p.anthropic_written,
                f"{p.anthropic_cost / naive.anthropic_cost:.2f}",
                "yes" if outcome.run.success else "no",
            ]
        )
        notes.append(f"  {outcome.config}: {outcome.run.detail}; {summaries} level-2 summaries")
    report(
        f"tokens: {workload}",
        ["config", "calls", "input", "x", "oai cached", "oai x", "ant read", "ant write",
         "ant x", "ok"],
        rows,
        notes=notes,
    )  # fmt: skip
    on = outcomes[-1].priced
    return on.openai_cost / naive.openai_cost, on.anthropic_cost / naive.anthropic_cost


async def main(quick: bool) -> int:
    workloads = ("loop", "long task", "conversation")
    async with (
        LlamaProcess(n_ctx=16384 if quick else 32768, parallel=1) as llama,
        httpx.AsyncClient(base_url=llama.url, timeout=120) as client,
    ):
        tokenizer = Tokenizer(client)
        results: dict[str, list[Outcome]] = {}
        for workload in workloads:
            results[workload] = [
                await measure(tokenizer, workload, name, savings, quick)
                for name, savings in CONFIGS.items()
            ]
        ratios = [table(workload, outcomes) for workload, outcomes in results.items()]
        chat = next(o for o in results["conversation"] if o.config == "all on")
        replay = chat.prompts[: 8 if quick else len(chat.prompts)]
        rows = await confirm_on_llama(client, replay)
    report(
        "tokens: all-on conversation replayed on llama.cpp (cache_prompt)",
        [
            "request",
            "server prompt tokens",
            "bench tokens",
            "shared with previous",
            "server cached",
        ],
        rows,
        notes=[
            "server cached = the prefix the server reused from its slot (llama.cpp re-evaluates "
            "at least the last token)."
        ],
    )
    failed = [
        o
        for outcomes in results.values()
        for o in outcomes
        if o.config == "all on" and not o.run.success
    ]
    # each workload weighs the same (the long task's naive bill would hide the others);
    # the provider that saves less decides
    ratio = max(sum(r[i] for r in ratios) / len(ratios) for i in (0, 1))
    reused = sum(row[4] for row in rows[1:])
    console.print(
        f"llama.cpp reused {reused} prompt tokens over {len(rows) - 1} follow-up requests"
    )
    console.print(f"token economy: all-on effective input cost {ratio:.2f} x naive")
    return 1 if failed or reused == 0 else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    sys.exit(event_loop.run(main(parser.parse_args().quick)))
