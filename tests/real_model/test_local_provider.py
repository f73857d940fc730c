"""``local:`` models: llama.cpp's server started lazily in a child process, stopped when
unused for ``models.local.idle_s`` and started again by the next request."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from longhaul.domain.config import LocalModelConfig, ModelsConfig
from longhaul.llm.local import LocalModel, LocalModelError, LocalServerError
from longhaul.llm.registry import ModelRegistry
from longhaul.llm.types import ModelRequest, TextDelta, ToolSpec

from tests.support.llama import TEMPLATE, THREADS, wheels_or_fail

pytestmark = pytest.mark.real_model


def test_unknown_names_and_missing_files_are_refused_with_the_choices(tmp_path: Path) -> None:
    registry = ModelRegistry(ModelsConfig(default="scripted:auto"), env={})
    for spec in ("local:nope", f"local:{tmp_path / 'missing.gguf'}", f"local:{tmp_path}"):
        with pytest.raises(LocalModelError, match=r"not a local model of this deployment"):
            registry.resolve(spec)
        # written by the operator, a path is taken, and must be a .gguf file
        operator = ModelRegistry(ModelsConfig(default=spec), env={})
        if spec != "local:nope":
            with pytest.raises(LocalModelError, match=r"no \.gguf file there"):
                operator.resolve(spec)


async def test_local_smollm2_starts_once_and_streams_a_named_tool_call() -> None:
    wheels_or_fail()
    config = ModelsConfig(
        local=LocalModelConfig(
            threads=THREADS, n_ctx=2048, parallel=1, chat_template=TEMPLATE, max_tokens=3
        )
    )
    async with ModelRegistry(config, env={}) as registry:
        model = registry.resolve("local:smollm2")
        again = registry.resolve("local:smollm2")
        assert isinstance(model, LocalModel) and isinstance(again, LocalModel)
        text = [
            event
            async for event in model.stream(
                ModelRequest(
                    model=model.name,
                    messages=[{"role": "user", "content": "Say hi."}],
                    max_tokens=8,
                    temperature=0,
                )
            )
            if isinstance(event, TextDelta)
        ]
        assert "".join(delta.text for delta in text).strip()
        [first] = registry.local_servers.running().values()
        # llama.cpp ignores tool_choice objects: {name} is sent as required + that tool only,
        # and with a prefill the server's grammar makes the model call exactly that tool
        response = await again.complete(
            ModelRequest(
                model=model.name,
                tools=[
                    ToolSpec(name="read"),
                    ToolSpec(
                        name="write",
                        parameters={
                            "type": "object",
                            "properties": {"path": {"type": "string"}},
                            "required": ["path"],
                        },
                    ),
                ],
                messages=[
                    {"role": "user", "content": "Write notes.txt."},
                    {"role": "assistant", "content": "<tool_call>\n"},
                ],
                tool_choice={"name": "write"},
                max_tokens=40,
                temperature=0,
            )
        )
        assert [call.name for call in response.tool_calls][:1] == ["write"]
        assert {call.name for call in response.tool_calls} == {"write"}
        # a request that sets no bound gets models.local.max_tokens (the two above set theirs)
        bounded = await model.complete(
            ModelRequest(
                model=model.name,
                messages=[{"role": "user", "content": "Tell me a long story about the sea."}],
                temperature=0,
            )
        )
        assert (bounded.finish_reason, bounded.usage.completion_tokens) == ("length", 3)
        # the registry's one server for that model file, not a second one
        [same] = registry.local_servers.running().values()
        assert same is first
    assert not child_alive(first.pid)  # closing the registry stopped it


def child_alive(pid: int) -> bool:
    """``pid`` is a live (not zombie) child of this process, read from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # gone before, or while, it was read
        return False
    state, ppid = stat.rpartition(")")[2].split()[:2]
    return state != "Z" and int(ppid) == os.getpid()


def rss_mb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def say_hi() -> ModelRequest:
    return ModelRequest(
        model="local:smollm2",
        messages=[{"role": "user", "content": "Say hi."}],
        max_tokens=8,
        temperature=0,
    )


async def test_an_idle_local_server_is_stopped_and_the_next_request_starts_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wheels_or_fail()
    caplog.set_level(logging.INFO, logger="longhaul.llm.local")
    idle_s = 2.0
    config = ModelsConfig(
        local=LocalModelConfig(threads=THREADS, n_ctx=1024, parallel=1, idle_s=idle_s)
    )
    async with ModelRegistry(config, env={}) as registry:
        servers = registry.local_servers
        model = registry.resolve("local:smollm2")
        assert not servers.running()  # resolving loads nothing
        own_rss = rss_mb()
        response = await model.complete(say_hi())
        finished = time.monotonic()
        assert response.content.strip()
        [server] = servers.running().values()
        assert child_alive(server.pid)
        server_rss = rss_mb(server.pid)
        assert server_rss > 50  # the model lives in the child ...
        assert rss_mb() - own_rss < server_rss / 2  # ... not in this process

        # a request still being read when idle_s passes keeps its server: the clock starts
        # when it ends (the wait is the point here, not a synchronisation)
        stream = model.stream(say_hi())
        parts = [await anext(stream)]
        await asyncio.sleep(idle_s * 1.5)
        assert child_alive(server.pid)
        parts += [event async for event in stream]
        assert "".join(p.text for p in parts if isinstance(p, TextDelta)).strip()
        finished = time.monotonic()
        assert child_alive(server.pid) and servers.running() == {server.spec: server}

        deadline = time.monotonic() + idle_s + 30
        while child_alive(server.pid):
            assert time.monotonic() < deadline, f"pid {server.pid} still runs after {idle_s} s"
            await asyncio.sleep(0.1)
        # not before idle_s had passed since the request ended
        assert time.monotonic() - finished >= idle_s
        assert not servers.running()
        assert any("unused for 2 s: stopping it" in r.getMessage() for r in caplog.records)

        again = await model.complete(say_hi())  # waits for the model to load again
        assert again.content.strip()
        [restarted] = servers.running().values()
        assert restarted.pid != server.pid and child_alive(restarted.pid)
        started = [r.getMessage() for r in caplog.records if "started: pid" in r.getMessage()]
        assert len(started) == 2 and all("loaded in" in line for line in started)
    assert not child_alive(restarted.pid)


async def test_a_file_llama_cpp_cannot_load_fails_the_request_with_its_words(
    tmp_path: Path,
) -> None:
    wheels_or_fail()
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    spec = f"local:{bogus}"
    async with ModelRegistry(ModelsConfig(default=spec), env={}) as registry:
        model = registry.resolve(spec)
        for _ in range(2):  # and again: a failed start leaves nothing half-started behind
            with pytest.raises(LocalServerError, match=r"bogus\.gguf exited with code 1") as err:
                await model.complete(say_hi())
            assert "Failed to init server" in str(err.value)
            assert not registry.local_servers.running()


CHILD_OWNER = """
import asyncio, sys
from longhaul.domain.config import LocalModelConfig, ModelsConfig
from longhaul.llm.registry import ModelRegistry
from longhaul.llm.types import ModelRequest

async def main():
    registry = ModelRegistry(ModelsConfig(local=LocalModelConfig(threads=1, n_ctx=512)), env={})
    model = registry.resolve("local:smollm2")
    request = ModelRequest(model="local:smollm2", messages=[{"role": "user", "content": "hi"}],
                           max_tokens=2)
    await model.complete(request)
    [server] = registry.local_servers.running().values()
    print(server.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_the_server_process_dies_with_the_process_that_started_it() -> None:
    wheels_or_fail()
    owner = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD_OWNER, stdout=asyncio.subprocess.PIPE
    )
    assert owner.stdout is not None
    try:
        async with asyncio.timeout(60):
            line = await owner.stdout.readline()
        server_pid = int(line)
        assert proc_state(server_pid) not in ("gone", "Z")
    finally:
        owner.send_signal(signal.SIGKILL)  # no cleanup of its own: the kernel's signal does it
        await owner.wait()
    deadline = time.monotonic() + 10
    while proc_state(server_pid) not in ("gone", "Z"):
        assert time.monotonic() < deadline, f"server {server_pid} outlived its parent"
        await asyncio.sleep(0.05)


def proc_state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return "gone"
