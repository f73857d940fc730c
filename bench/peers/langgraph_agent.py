"""The LangGraph side: ``create_react_agent`` with a zero-latency fake chat model and one no-op
tool, checkpointed by InMemorySaver, SqliteSaver or PostgresSaver.

The model answers each call instantly with one tool call (``noop`` with the step number) until
``steps`` calls were made, then a final answer, exactly like ``bench_executor.instant_model``
does for longhaul: same model calls, tool calls and messages per step on both sides. Its
response does not look at the history, so what is measured is the framework and its saver.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from psycopg.rows import dict_row

with warnings.catch_warnings():  # create_react_agent is deprecated in favour of langchain's
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


@tool
def noop(n: int) -> str:
    """Do nothing (benchmark tool).

    Args:
        n: the step number.
    """
    return "ok"


class InstantToolCaller(BaseChatModel):
    """Calls ``noop`` ``steps`` times, then answers ``done``; O(1) per call."""

    steps: int
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "bench-instant"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> InstantToolCaller:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        n = self.calls
        self.calls += 1
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        if n >= self.steps:
            message = AIMessage(content="done", usage_metadata=usage)
        else:
            call = {"id": f"call_{n}", "name": "noop", "args": {"n": n}, "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


@dataclass
class Saver:
    """One checkpointer: how to open it in ``directory`` and how many bytes it holds."""

    name: str
    open: Callable[[Path], contextlib.AbstractContextManager[BaseCheckpointSaver[Any]]]
    stored_bytes: Callable[[BaseCheckpointSaver[Any], Path], int]


@contextlib.contextmanager
def _memory(_directory: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    yield InMemorySaver()


def _memory_bytes(saver: BaseCheckpointSaver[Any], _directory: Path) -> int:
    """Serialized bytes InMemorySaver keeps: checkpoints, metadata, pending writes, blobs."""
    assert isinstance(saver, InMemorySaver)
    total = 0
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for (_, checkpoint), (_, metadata), _parent in checkpoints.values():
                total += len(checkpoint) + len(metadata)
    for writes in saver.writes.values():
        for _task, _channel, (_, value), _path in writes.values():
            total += len(value)
    total += sum(len(value) for (_, value) in saver.blobs.values())
    return total


@contextlib.contextmanager
def _sqlite(directory: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    conn = sqlite3.connect(directory / "checkpoints.sqlite", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _sqlite_bytes(saver: BaseCheckpointSaver[Any], directory: Path) -> int:
    """The database file's size once the write-ahead log is folded into it."""
    assert isinstance(saver, SqliteSaver)
    saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in directory.glob("checkpoints.sqlite*"))


def postgres(url: str) -> Saver:
    """PostgresSaver on the server at ``url``, a fresh database per run (named after the run's
    directory) so its relation sizes are the run's alone."""

    @contextlib.contextmanager
    def open_saver(directory: Path) -> Iterator[BaseCheckpointSaver[Any]]:
        database = "run_" + "".join(ch if ch.isalnum() else "_" for ch in directory.name.lower())
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
        run_url = url.rsplit("/", 1)[0] + "/" + database
        with psycopg.connect(
            run_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            saver = PostgresSaver(conn)
            saver.setup()
            yield saver

    return Saver("PostgresSaver", open_saver, _postgres_bytes)


def _postgres_bytes(saver: BaseCheckpointSaver[Any], _directory: Path) -> int:
    """Total size of the saver's relations (tables, TOAST, indexes) in its database."""
    assert isinstance(saver, PostgresSaver) and isinstance(saver.conn, psycopg.Connection)
    row = saver.conn.execute(
        "SELECT sum(pg_total_relation_size(c.oid))::bigint AS size FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind = 'r'"
    ).fetchone()
    assert row is not None
    return int(row["size"])


MEMORY = Saver("InMemorySaver", _memory, _memory_bytes)
SQLITE = Saver("SqliteSaver", _sqlite, _sqlite_bytes)


@dataclass
class Run:
    seconds: float
    stored_bytes: int
    load_seconds: float
    messages: int


def run(saver_kind: Saver, directory: Path, steps: int) -> Run:
    """One thread of ``steps`` steps; then the state loaded back through a fresh graph."""
    config: Any = {"configurable": {"thread_id": "bench"}, "recursion_limit": 2 * steps + 10}
    with saver_kind.open(directory) as saver:
        agent = create_react_agent(InstantToolCaller(steps=steps), [noop], checkpointer=saver)
        started = time.perf_counter()
        agent.invoke({"messages": [("user", "benchmark")]}, config)
        seconds = time.perf_counter() - started
        stored = saver_kind.stored_bytes(saver, directory)
        reader = create_react_agent(InstantToolCaller(steps=0), [noop], checkpointer=saver)
        started = time.perf_counter()
        state = reader.get_state(config)
        load_seconds = time.perf_counter() - started
    return Run(seconds, stored, load_seconds, len(state.values["messages"]))
