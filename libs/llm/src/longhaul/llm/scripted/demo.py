"""``scripted:demo``: an offline agent worth watching (what ``make run`` uses without a provider).

On any request it does what a real agent would: plans with the ``goal`` tool, lists the files
of its working directory and reads a few, writes a short result file, delegates one check to
a sub-agent, marks its goals done and answers with what it did. The sub-agent (recognised by
its task's first words) reads the result file and reports on it.

Like every scripted model it is a pure function of the conversation: the next step follows
from the calls made since the last user message, so a resumed, rewound or replayed trace
continues where its log says it is. Asked again after a rewind into its plan (goals made, no
answer yet), it carries that plan on rather than making it twice. A completed goal's calls
are folded into the goal's note (level-1 compaction): the note says the goal's work is done
and its summary carries what the rest of the run needs (the file count, the sub-agent's
report). Requests it cannot serve that way (structured output for the planner or verifier,
or a tool set without the file and goal tools) get ``scripted:auto``'s answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from longhaul.domain.messages import content_text
from longhaul.llm.prompt import GOAL_NOTE
from longhaul.llm.scripted.auto import auto_turn
from longhaul.llm.types import ChatMessage, ModelRequest

RESULT_FILE = "longhaul-demo-result.md"
SUBTASK_PREFIX = "Demo sub-task:"
NEEDED = frozenset({"goal", "glob", "read", "write"})
MAX_READS = 2
_LIST_LIMIT = 20
_GOALS = (
    "Survey the working directory",
    "Write a short result file",
    "Have a sub-agent check the result",
)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


CONTEXT_NOTE = "[Context after "
"""How the harness's periodic context reminder (a user message) starts
(``longhaul.agent.middleware.context_injection``): not a new request."""


def _last_user(messages: Sequence[ChatMessage]) -> int:
    """The index of the last user request (-1: none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user" and not content_text(message.get("content")).startswith(
            CONTEXT_NOTE
        ):
            return index
    return -1


def _calls(messages: Sequence[ChatMessage]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            found.append(
                (str(function.get("name")), arguments if isinstance(arguments, dict) else {})
            )
    return found


def _result_of(messages: Sequence[ChatMessage], tool: str) -> str:
    """The output of the latest call of ``tool`` in ``messages``."""
    ids = {
        str(call.get("id")): str(call.get("function", {}).get("name"))
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }
    for message in reversed(messages):
        if message.get("role") == "tool" and ids.get(str(message.get("tool_call_id"))) == tool:
            return content_text(message.get("content"))
    return ""


def _answered(messages: Sequence[ChatMessage]) -> bool:
    """Whether a run in ``messages`` ended: an answer (an assistant message without calls that
    is not a folded goal's note)."""
    return any(
        message.get("role") == "assistant"
        and not message.get("tool_calls")
        and not GOAL_NOTE.match(content_text(message.get("content")))
        for message in messages
    )


def _plan_start(messages: Sequence[ChatMessage]) -> int:
    """The request whose plan this turn works on: the last one, unless the conversation was
    rewound into an earlier request's plan (it made goals and never answered) and asked
    again; then that plan is carried on, not made a second time."""
    cut = _last_user(messages)
    while cut > 0:
        previous = _last_user(messages[:cut])
        between = messages[previous + 1 : cut]
        planned = any(name == "goal" and args.get("op") == "add" for name, args in _calls(between))
        if previous < 0 or not planned or _answered(between):
            break
        cut = previous
    return cut


def _goal_base(earlier: Sequence[ChatMessage]) -> int:
    """Goals created before this request: the new ones are numbered after them."""
    creates = {"add", "under", "after"}
    return sum(1 for name, args in _calls(earlier) if name == "goal" and args.get("op") in creates)


def _files(listing: str) -> list[str]:
    lines = [line.strip() for line in listing.splitlines()]
    return [
        line
        for line in lines
        if line and line != "no matches" and not line.startswith("…") and line != RESULT_FILE
    ]


def _folded(messages: Sequence[ChatMessage]) -> dict[str, str]:
    """Goals whose calls were folded into a note: id -> summary."""
    notes = {}
    for message in messages:
        if message.get("role") == "assistant":
            match = GOAL_NOTE.match(content_text(message.get("content")))
            if match:
                notes[match.group(1)] = match.group(3)
    return notes


def _report(agent_result: str) -> str:
    """A sub-agent's summary without the tool's "Sub-agent <id> (…):" heading."""
    head, sep, rest = agent_result.partition("\n")
    return rest.strip() if sep and head.startswith("Sub-agent") else agent_result.strip()


def _subagent_turn(task: str, recent: Sequence[ChatMessage]) -> dict[str, Any]:
    if not any(name == "read" for name, _ in _calls(recent)):
        return {
            "content": f"I'll read {RESULT_FILE} and check it.",
            "tool_calls": [_call("read", path=RESULT_FILE)],
        }
    text = _result_of(recent, "read")
    # read numbers its lines ("     1\t# title"): report the text, not the numbers
    lines = [line.partition("\t")[2] or line for line in text.splitlines() if line.strip()]
    return {
        "content": f"Checked {RESULT_FILE}: {len(lines)} non-empty lines; "
        f"it starts with {lines[0].strip()[:80]!r}."
        if lines
        else f"{RESULT_FILE} is empty or missing."
    }


def demo_turn(request: ModelRequest) -> dict[str, Any]:
    offered = {tool.name for tool in request.tools}
    if request.response_schema is not None or not NEEDED <= offered:
        return auto_turn(request)
    messages = request.messages
    last = _last_user(messages)
    ask = content_text(messages[last].get("content")) if last >= 0 else ""
    if ask.startswith(SUBTASK_PREFIX):
        return _subagent_turn(ask, messages[last + 1 :])
    cut = _plan_start(messages)
    recent = messages[cut + 1 :]
    done = _calls(recent)
    names = [name for name, _ in done]
    base = _goal_base(messages[: max(cut, 0)])
    g1, g2, g3 = (f"g{base + n}" for n in (1, 2, 3))
    delegate = "agent" in offered
    folded = _folded(recent)
    for goal_id, work in ((g1, ("glob", "read")), (g2, ("write",)), (g3, ("agent",))):
        if goal_id in folded:
            names.extend(work)

    def ended(goal_id: str) -> bool:
        return goal_id in folded or any(
            name == "goal" and args.get("goal_id") == goal_id and args.get("op") == "done"
            for name, args in done
        )

    def finish(goal_id: str, summary: str, then: str | None, say: str) -> dict[str, Any]:
        # A goal is marked done in a step of its own: the step belongs to the goal (its
        # focus), so folding the goal never hides the next goal's work.
        calls = [_call("goal", op="done", goal_id=goal_id, summary=summary)]
        if then is not None:
            calls.append(_call("goal", op="focus", goal_id=then))
        return {"content": say, "tool_calls": calls}

    if not done:
        goals = _GOALS if delegate else _GOALS[:2]
        return {
            "content": "Plan: survey the workdir, write up what I find"
            + (", and have a sub-agent check it." if delegate else "."),
            "tool_calls": [_call("goal", op="add", title=title) for title in goals],
        }
    if "glob" not in names:
        return {
            "content": "Looking at the files in the working directory.",
            "tool_calls": [_call("goal", op="focus", goal_id=g1), _call("glob", pattern="**/*")],
        }
    files = _files(_result_of(recent, "glob"))
    # Once the survey is folded, its note (the goal's summary) carries the count and names.
    survey = re.match(r"(\d+) file\(s\) found(?:: (.*))?", folded.get(g1, ""), re.DOTALL)
    if survey:
        files = [name for name in (survey.group(2) or "").split(", ") if name]
    count = int(survey.group(1)) if survey else len(files)
    if not ended(g1):
        if "read" not in names and files:
            return {
                "content": f"Found {len(files)} file(s); reading up to {MAX_READS}.",
                "tool_calls": [_call("read", path=path, limit=20) for path in files[:MAX_READS]],
            }
        found = f"{len(files)} file(s) found" + (
            f": {', '.join(files[:_LIST_LIMIT])}" if files else ""
        )
        return finish(g1, found, g2, "The survey is done.")
    if "write" not in names:
        listing = "\n".join(f"- {path}" for path in files[:_LIST_LIMIT]) or "- (no files yet)"
        more = f"\n- … {len(files) - _LIST_LIMIT} more" if len(files) > _LIST_LIMIT else ""
        content = (
            f"# longhaul demo\n\nRequest: {ask.strip()[:200]}\n\n"
            f"Files in the working directory ({count}):\n{listing}{more}\n"
        )
        return {
            "content": f"Writing {RESULT_FILE}.",
            "tool_calls": [_call("write", path=RESULT_FILE, content=content)],
        }
    if not ended(g2):
        return finish(
            g2, f"wrote {RESULT_FILE}", g3 if delegate else None, f"{RESULT_FILE} is written."
        )
    if delegate and "agent" not in names:
        return {
            "content": "Asking a sub-agent to check the result file.",
            "tool_calls": [
                _call(
                    "agent",
                    mode="delegate",
                    task=f"{SUBTASK_PREFIX} read {RESULT_FILE} and report what it holds.",
                ),
            ],
        }
    if delegate and not ended(g3):
        report = _report(_result_of(recent, "agent"))[:200]
        return finish(g3, report, None, "Marking the plan done.")
    check = folded.get(g3) or _report(_result_of(recent, "agent"))
    return {
        "content": (
            (
                f"Done. I listed the working directory ({count} file(s)), read "
                f"{min(count, MAX_READS)} of them, wrote {RESULT_FILE} with the list"
                if count
                else f"Done. The working directory had no files yet; I wrote {RESULT_FILE} "
                "saying so"
            )
            + (f", and a sub-agent checked it: {check[:300].rstrip('.')}" if delegate else "")
            + "."
        )
    }
