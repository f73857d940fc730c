"""One MCP session (:class:`McpServer`): started with the official ``mcp`` SDK's
:class:`mcp.Client`, kept open by a supervising task, restarted when it dies, and, for a
per-key instance, stopped when idle; and the mapping of an MCP result to a tool message.

The supervisor holds the session open; when the server dies (a call finds the connection
closed) it closes what is left and connects again after a pause that doubles up to
``restart_max_delay_s``. A per-key instance (see :mod:`longhaul.agent.tools.mcp_keys`) runs
its command in the sandbox ``bash`` runs in, in its key's directory, and ends its session once
no call has used it for ``idle_s``.

A call never hangs a turn: it is bounded by ``call_timeout_s``; a server that is down answers
at once with ``mcp_unavailable`` (while a restart attempt is under way the call waits for it, at
most ``connect_timeout_s``); a server that dies under a call answers ``mcp_server_died``. The
call is not repeated by the harness: the model decides, as for any failed tool.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
import os
import re
import resource
import string
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import mcp_types
from longhaul.agent.errors import ToolError
from longhaul.agent.messages import error_text
from longhaul.agent.tools.catalogue import ServerState
from longhaul.agent.tools.childproc import child_env
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.offload import fit_output
from longhaul.agent.tools.result import Attachment, ToolResult
from longhaul.agent.tools.sandbox import Sandbox, rlimits
from longhaul.domain.config import McpServerConfig, SandboxConfig
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

log = logging.getLogger(__name__)

IDEMPOTENCY_META_KEY = "io.longhaul/idempotency-key"
"""In every call's ``_meta``: the call's idempotency key, the same when the executor re-runs
the call after a crash, so a server that honours it acts once."""


def _meta(idempotency_key: str) -> mcp_types.RequestParamsMeta:
    # an open map (PEP 728 ``extra_items``): extra keys round-trip, which mypy cannot see
    return cast(mcp_types.RequestParamsMeta, {IDEMPOTENCY_META_KEY: idempotency_key})


SEPARATOR = "__"
MAX_NAME = 64
"""Longest tool name every provider accepts (OpenAI: ``^[a-zA-Z0-9_-]{1,64}$``)."""
FIRST_RESTART_DELAY_S = 0.5


def exposed_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` with characters providers refuse replaced, cut to 64."""
    return (server + SEPARATOR + re.sub(r"[^A-Za-z0-9_-]", "_", tool))[:MAX_NAME]


def _expand(value: str, environ: Mapping[str, str], where: str) -> str:
    try:
        return string.Template(value).substitute(environ)
    except KeyError as exc:
        raise ValueError(f"{where}: environment variable {exc.args[0]} is not set") from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


_PRLIMIT = {
    resource.RLIMIT_AS: "--as",
    resource.RLIMIT_NPROC: "--nproc",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_CORE: "--core",
}


def _limited(argv: list[str], config: SandboxConfig) -> list[str]:
    """``argv`` under the sandbox's resource limits, set by ``prlimit``: the SDK starts the
    server with no ``preexec_fn``. CPU time is left out: a server lives across many calls and
    keys' turns, and its seconds would add up to a kill in the middle of one."""
    flags = [
        f"{_PRLIMIT[which]}={soft}:{hard}"
        for which, soft, hard in rlimits(config)
        if which in _PRLIMIT
    ]
    return ["prlimit", *flags, "--", *argv]


@dataclass(frozen=True)
class Placement:
    """Where a per-key instance runs: a command in ``sandbox`` with ``working_dir`` as its
    cwd and only writable path; a url session with ``headers`` added (its key's)."""

    working_dir: Path | None = None
    sandbox: Sandbox | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class McpServer:
    """One configured server and the supervisor that keeps its session open."""

    name: str
    config: McpServerConfig
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    state: ServerState = "starting"
    last_error: str | None = None
    tools: list[mcp_types.Tool] = field(default_factory=list)
    restarts: int = 0
    listener: Callable[[McpServer], None] | None = None
    """Called on every change of state (``up`` with the fresh tool listing)."""
    placement: Placement | None = None
    """``None``: the operator's shared server, run as configured (``cwd``, unconfined)."""
    idle_s: float | None = None
    """End the session once no call has used it this long (``None``: never)."""
    _client: Client | None = None
    _busy: int = 0
    _last_used: float = field(default_factory=time.monotonic)
    _broken: asyncio.Event = field(default_factory=asyncio.Event)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _next_attempt: float = 0.0

    async def _prepare(self) -> None:
        """A sandboxed server's directory is handed to the sandbox's user (when the service
        is root) before it starts, as before every ``bash`` run."""
        place = self.placement or Placement()
        if place.working_dir is not None and place.sandbox is not None:
            await asyncio.to_thread(place.sandbox.prepare, [place.working_dir])

    def _transport(self) -> Any:
        config = self.config
        where = f"tools.mcp_servers.{self.name}"
        place = self.placement or Placement()
        if config.url is not None:
            headers = {
                key: _expand(value, self.environ, f"{where}.headers.{key}")
                for key, value in {**config.headers, **place.headers}.items()
            }
            http = create_mcp_http_client(headers=headers)
            return streamable_http_client(config.url, http_client=http)
        assert config.command is not None
        env = {
            key: _expand(value, self.environ, f"{where}.env.{key}")
            for key, value in config.env.items()
        }
        if place.working_dir is None or place.sandbox is None:
            return StdioServerParameters(
                command=config.command, args=config.args, env=env, cwd=config.cwd
            )
        # the allow-listed environment plus the operator's, inside bubblewrap (raises
        # SandboxUnavailable, reported as the server's start error, when there is none)
        env = child_env(place.working_dir, env)
        argv = place.sandbox.command(
            _limited([config.command, *config.args], place.sandbox.config),
            working_dir=place.working_dir,
            env=env,
        )
        return StdioServerParameters(
            command=argv[0], args=argv[1:], env=env, cwd=str(place.working_dir)
        )

    async def supervise(self) -> None:
        """Connect, list the tools, hold the session until it breaks; again, with backoff."""
        delay = FIRST_RESTART_DELAY_S
        idle = False
        while True:
            self.state = "starting"
            self._broken.clear()
            self._signal()
            try:
                async with contextlib.AsyncExitStack() as stack:
                    async with asyncio.timeout(self.config.connect_timeout_s):
                        await self._prepare()
                        client = Client(
                            self._transport(), read_timeout_seconds=self.config.call_timeout_s
                        )
                        await stack.enter_async_context(client)
                        self.tools = await self._list(client)
                    self._client = client
                    self.state = "up"
                    self.last_error = None
                    delay = FIRST_RESTART_DELAY_S
                    self._signal()
                    log.info("MCP server %s is up with %d tool(s)", self.name, len(self.tools))
                    if not await self._hold():
                        idle = True
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                self._failed(f"no answer within {self.config.connect_timeout_s:g} s")
            except Exception as exc:  # a server that fails to start must not stop the others
                self._failed(_describe(exc))
            finally:
                self._client = None
            if idle or self._unused():  # a failing instance no call wants is not restarted
                log.info("MCP server %s stopped: unused for %g s", self.name, self.idle_s)
                self.state = "idle"
                self._signal()
                return
            log.warning(
                "MCP server %s is down (%s); next start in %.1f s",
                self.name,
                self.last_error,
                delay,
            )
            self.state = "down"
            self.restarts += 1
            self._next_attempt = time.monotonic() + delay
            self._signal()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.restart_max_delay_s)

    def _unused(self) -> bool:
        return (
            self.idle_s is not None
            and not self._busy
            and time.monotonic() - self._last_used >= self.idle_s
        )

    async def _hold(self) -> bool:
        """Wait until the session breaks (``True``) or, with ``idle_s``, until no call has
        used it for that long (``False``)."""
        if self.idle_s is None:
            await self._broken.wait()
            return True
        while True:
            if self._unused():
                return False
            left = self._last_used + self.idle_s - time.monotonic()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(left, 0.0) or self.idle_s):
                    await self._broken.wait()
                    return True

    def _failed(self, reason: str) -> None:
        """A start that failed, or the close of a session a call found broken (whose
        reason, already recorded, is the one worth keeping)."""
        if not self._broken.is_set():
            self.last_error = reason

    def _signal(self) -> None:
        if self.listener is not None:
            self.listener(self)
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_started(self) -> None:
        """Return once the server is up or its current attempt failed."""
        while self.state == "starting":
            await self._changed.wait()

    @staticmethod
    async def _list(client: Client) -> list[mcp_types.Tool]:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools

    def _broke(self, reason: str) -> None:
        """A call found the session closed: no later call uses it; the supervisor restarts."""
        self.last_error = reason
        self._client = None
        self.state = "down"
        self._broken.set()
        self._signal()

    async def _connected(self) -> Client:
        if self.state == "starting":
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.connect_timeout_s):
                    await self.wait_started()
        if self._client is not None:
            return self._client
        retry = self._next_attempt - time.monotonic()
        when = f"its next start is in {retry:.1f} s" if retry > 0 else "it is being restarted"
        raise ToolError(
            f"MCP server {self.name} is not running ({self.last_error or 'not started'}); {when}",
            code="mcp_unavailable",
        )

    async def call(self, ctx: ToolContext, tool: str, arguments: dict[str, Any]) -> ToolResult:
        self._busy += 1  # before any await: an idle check never stops a session in use
        try:
            return await self._call(ctx, tool, arguments)
        finally:
            self._busy -= 1
            self._last_used = time.monotonic()

    async def _call(self, ctx: ToolContext, tool: str, arguments: dict[str, Any]) -> ToolResult:
        client = await self._connected()
        seconds = self.config.call_timeout_s
        qualified = exposed_name(self.name, tool)
        try:
            async with asyncio.timeout(seconds + 1):
                result = await client.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=seconds,
                    meta=_meta(ctx.idempotency_key),
                )
        except TimeoutError:
            raise ToolError(
                f"{qualified} did not answer within {seconds:g} s", code="mcp_timeout"
            ) from None
        except MCPError as exc:
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                raise ToolError(
                    f"{qualified} did not answer within {seconds:g} s", code="mcp_timeout"
                ) from None
            if exc.code != mcp_types.CONNECTION_CLOSED:
                raise ToolError(f"{qualified} was refused: {exc}", code="mcp_error") from None
            self._broke(str(exc))
            raise ToolError(_died(self.name, qualified, str(exc)), code="mcp_server_died") from None
        except Exception as exc:  # the transport broke under the call
            self._broke(_describe(exc))
            raise ToolError(
                _died(self.name, qualified, _describe(exc)), code="mcp_server_died"
            ) from None
        return await tool_result(ctx, qualified, result)


def _died(server: str, qualified: str, reason: str) -> str:
    return (
        f"MCP server {server} went away during {qualified} ({reason}); whether the call took "
        "effect is unknown. The server is being restarted: call again once it is back"
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def _decoded(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data.encode()


async def tool_result(
    ctx: ToolContext, qualified: str, result: mcp_types.CallToolResult
) -> ToolResult:
    """An MCP result as a tool message: text blocks in order, binaries as attachments (stored
    in the workspace, referenced in the message), the structured content as JSON when no text
    block carries it, long output offloaded like any tool's."""
    parts: list[str] = []
    attachments: list[Attachment] = []
    texts = 0
    for index, block in enumerate(result.content):
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
            texts += 1
        elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
            extension = _EXTENSIONS.get(block.mime_type, "bin")
            attachments.append(
                Attachment(
                    f"{block.type}-{index}.{extension}", _decoded(block.data), block.mime_type
                )
            )
        elif isinstance(block, mcp_types.ResourceLink):
            parts.append(f"[resource {block.uri}] {block.name}")
        elif isinstance(block, mcp_types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, mcp_types.TextResourceContents):
                parts.append(f"[resource {resource.uri}]\n{resource.text}")
                texts += 1
            else:
                media = resource.mime_type or "application/octet-stream"
                attachments.append(Attachment(f"resource-{index}", _decoded(resource.blob), media))
    if result.structured_content is not None and not texts:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    data = "\n".join(parts).encode()
    fitted = await fit_output(ctx, data, len(data))
    # an offloaded output is shown once, then only its notice (how to page through it)
    once = fitted.notice is not None
    memory = f"{qualified}: (output shown once) {fitted.notice}" if once else None
    if result.is_error:
        return ToolResult(
            output=error_text("mcp_tool_error", fitted.text or f"{qualified} failed"),
            title=qualified,
            long_term_memory=memory,
            include_output_only_once=once,
            attachments=tuple(attachments),
            error_code="mcp_tool_error",
        )
    return ToolResult(
        output=fitted.text,
        title=qualified,
        long_term_memory=memory,
        include_output_only_once=once,
        attachments=tuple(attachments),
    )
