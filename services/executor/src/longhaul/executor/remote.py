"""Remote sub-agents: a child trace run by another longhaul (config ``remote_agents``).

Starting: on the parent's ``subtrace_spawned`` (``remote`` set) the executor creates the trace
on the remote gateway through ``longhaul.client`` (``POST /api/traces``, or ``POST …/run``
for a ``continue_from``) and appends ``remote_subtrace_linked`` {``agent://host:port/<id>``} to the
parent; a refusal (401, 404, 422), a timeout or an unreachable host ends the child at once as
``failed`` with the reason, so the parent gets a clear tool result and never hangs.

Waiting holds no worker: each ``remote_subtrace_linked`` is a message of a second durable
consumer (unlimited deliveries). A delivery asks the remote once for the trace's status; not
finished yet, the message is handed back with a delay (``poll_s``), so the wait lives in
JetStream and any executor, including one restarted after a crash, picks it up. Finished, the
parent gets ``subtrace_finished`` with the remote summary and usage. A remote that stays
unreachable for ``give_up_s`` fails the child. A crash between the remote's answer and the
link is covered by the creation's ``Idempotency-Key`` (parent, tool call and child id): the
retried spawn gets the same remote trace back instead of creating a second one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from longhaul.client import AsyncClient
from longhaul.client.errors import (
    ApiError,
    Forbidden,
    LonghaulError,
    NotFound,
    Unauthorized,
    Unreachable,
)
from longhaul.core.connection import Connection
from longhaul.core.consumer import ConsumerHooks, ConsumerSpec, Delivery, consume
from longhaul.core.repository import Repository
from longhaul.domain import events as ev
from longhaul.domain.config import RemoteAgentConfig
from longhaul.domain.state import SubtraceInfo, TraceState
from longhaul.executor.appends import append_while
from longhaul.executor.capped_http import AnswerRefused, CappedTransport
from longhaul.executor.remote_status import (
    SUMMARY_LIMIT,
    RemoteError,
    RemoteStatus,
    remote_id,
    remote_trace_id,
)

if TYPE_CHECKING:
    from longhaul.executor.a2a_remote import A2AAgents

log = logging.getLogger(__name__)

T = TypeVar("T")

FINAL = frozenset({"completed", "failed", "stopped"})


class RemoteAgents:
    """The configured remote gateways, one ``longhaul.client.AsyncClient`` each (every call
    bounded by the remote's ``timeout_s``, every answer by its ``max_response_bytes``, as an
    A2A agent's); the client's exceptions become :class:`RemoteError`."""

    def __init__(self, configs: dict[str, RemoteAgentConfig]) -> None:
        self.configs = configs
        self._clients: dict[str, AsyncClient] = {}
        self.a2a: A2AAgents | None = None
        """The entries with ``protocol: a2a``: every call on them goes there."""
        a2a = {n: c for n, c in configs.items() if c.protocol == "a2a"}
        if a2a:  # imported when configured: a2a-sdk (protobuf) slows every executor's start
            from longhaul.executor.a2a_remote import A2AAgents

            self.a2a = A2AAgents(a2a)

    def _over_a2a(self, name: str) -> A2AAgents | None:
        return self.a2a if self.a2a is not None and name in self.a2a.configs else None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        if self.a2a is not None:
            await self.a2a.aclose()

    def _client(self, name: str) -> AsyncClient:
        config = self.configs.get(name)
        if config is None:
            raise RemoteError(f"remote agent {name!r} is not configured here")
        if name not in self._clients:
            key = os.environ.get(config.api_key_env) if config.api_key_env else None
            # "" and not None: never fall back to this process's own LONGHAUL_API_KEY
            self._clients[name] = AsyncClient(
                config.url,
                key or "",
                timeout=config.timeout_s,
                transport=CappedTransport(config.max_response_bytes),
            )
        return self._clients[name]

    async def _ask(self, name: str, call: Callable[[AsyncClient], Awaitable[T]]) -> T:
        client = self._client(name)
        where = f"remote agent {name!r} ({client.settings.base_url})"
        try:
            return await call(client)
        except AnswerRefused as exc:  # final: asked again, it would answer the same
            limit = f"remote_agents.{name}.max_response_bytes"
            raise RemoteError(f"{where} {exc} ({limit}): not read") from exc
        except (Unauthorized, Forbidden) as exc:
            raise RemoteError(f"{where} refused our API key ({exc.status})") from exc
        except NotFound as exc:
            raise RemoteError(f"{where} has no such trace (404)") from exc
        except ApiError as exc:
            if exc.status in (429, 502, 503, 504):
                raise RemoteError(f"{where} is busy ({exc.status})", transient=True) from exc
            raise RemoteError(f"{where} answered {exc.status}: {exc.message[:500]}") from exc
        except Unreachable as exc:
            raise RemoteError(f"{where} is unreachable", transient=True) from exc
        except LonghaulError as exc:  # timed out, or the connection dropped
            raise RemoteError(f"{where}: {exc}", transient=True) from exc

    async def start(self, parent: TraceState, info: SubtraceInfo, name: str) -> str | RemoteStatus:
        """Create (or continue) the remote trace; returns its ``agent://`` id (or, from an
        A2A agent that answers at once, its status). A creation carries an
        ``Idempotency-Key`` made from the spawn, so a retry after a crash between the
        remote's answer and the link finds the trace the first attempt created."""
        if a2a := self._over_a2a(name):
            return await a2a.start(parent, info, name)
        messages = [msgspec.to_builtins(message) for message in info.inputs()]
        if info.remote_id is not None:
            trace_id = remote_trace_id(info.remote_id)
            await self._ask(name, lambda c: c.run(trace_id, messages))
        else:
            key = f"longhaul:{parent.trace_id}:{info.tool_call_id}:{info.child_trace_id}"
            accepted = await self._ask(
                name,
                lambda c: c.create_trace(
                    messages,
                    preset=info.preset,
                    tools=parent.tools_for_children(),
                    name=f"remote {info.mode}",
                    idempotency_key=key,
                    messaging=parent.config.messaging,
                ),
            )
            trace_id = accepted.trace_id
        return remote_id(self.configs[name], trace_id)

    async def send_message(self, name: str, linked: str, content: str, *, wake: bool) -> None:
        """Into the remote child's inbox, from its ``parent``."""
        if self._over_a2a(name):
            raise RemoteError(f"{name!r} is an A2A agent: it has no inbox (use continue_from)")
        await self._ask(
            name,
            lambda c: c.send_message(remote_trace_id(linked), content, sender="parent", wake=wake),
        )

    async def stop(self, name: str, linked: str) -> None:
        if a2a := self._over_a2a(name):
            return await a2a.stop(name, linked)
        await self._ask(name, lambda c: c.stop(remote_trace_id(linked)))

    async def status(self, name: str, linked: str) -> RemoteStatus:
        if a2a := self._over_a2a(name):
            return await a2a.status(name, linked)
        view = await self._ask(name, lambda c: c.get_trace(remote_trace_id(linked)))
        problem = usage_problem(view.run_usage.tokens, view.run_usage.cost)
        if problem is not None:
            # a NaN would poison the parent's fold, a negative cost would refund its budget
            raise RemoteError(f"remote agent {name!r} reported an impossible usage: {problem}")
        summary = view.summary or view.error or view.stop_reason or ""
        if view.status == "failed":
            summary = f"failed: {summary}"
        elif view.status == "stopped":
            summary = f"stopped: {summary or 'stop requested'}"
        return RemoteStatus(
            status=view.status,
            summary=summary[:SUMMARY_LIMIT],
            tokens=view.run_usage.tokens,
            cost=view.run_usage.cost,
        )


async def finish_remote(
    traces: Repository[TraceState],
    parent: TraceState,
    child: str,
    status: RemoteStatus,
    *,
    actor: str,
) -> bool:
    """Append the remote child's end to the parent (once)."""
    finished = ev.SubtraceFinished(
        child_trace_id=child,
        status=status.status if status.status in FINAL else "failed",  # type: ignore[arg-type]
        summary=status.summary,
        tokens=status.tokens,
        cost=status.cost,
    )
    return await append_while(traces, parent, finished, lambda p: _running(p, child), actor=actor)


def _running(parent: TraceState, child: str) -> bool:
    info = parent.subtraces.get(child)
    return info is not None and info.status == "running"


def usage_problem(tokens: object, cost: object) -> str | None:
    """What is wrong with a remote's reported usage: tokens must be a non-negative integer,
    the cost a finite non-negative number."""
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        return f"tokens {tokens!r}"
    if not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0:
        return f"cost {cost!r}"
    return None


def failure(message: str) -> RemoteStatus:
    return RemoteStatus(status="failed", summary=f"failed: {message}", tokens=0, cost=0.0)


class RemoteWaits(ConsumerHooks):
    """The durable wait: follows every linked remote child until it ends (see module doc).
    It runs on the one consumer loop; a failed look is asked again in 5 s, never given up."""

    spans = False

    def __init__(
        self,
        conn: Connection,
        traces: Repository[TraceState],
        remote: RemoteAgents,
        *,
        durable: str,
        actor: str,
        ack_wait_s: float,
        on_finished: Any,
    ) -> None:
        self.conn = conn
        self.traces = traces
        self.remote = remote
        self.actor = actor
        self.on_finished = on_finished
        self.spec = ConsumerSpec(
            durable=durable,
            subjects=[conn.names.type_filter("trace", "remote_subtrace_linked")],
            description="longhaul executors: waits on remote sub-agents",
            ack_wait_s=ack_wait_s,
            max_deliver=-1,
        )

    async def run(self, shutdown: asyncio.Event) -> None:
        await consume(self.conn, self.spec, self._check, shutdown, hooks=self)

    def key(self, delivery: Delivery) -> str | None:
        return None

    async def failed(self, spec: ConsumerSpec, delivery: Delivery, exc: Exception) -> float | str:
        log.error("remote wait on %s failed; retrying", delivery.aggregate_id, exc_info=exc)
        return 5.0

    async def _check(self, delivery: Delivery) -> float | None:
        """``None``: the wait is over; else ask again after that many seconds."""
        try:
            linked = ev.decode(delivery.data)
        except ev.EventDecodeError:
            linked = None
        if not isinstance(linked, ev.RemoteSubtraceLinked) or not linked.aggregate_id:
            log.warning(
                "remote waits: dropping %s of %s, not a remote_subtrace_linked event",
                delivery.event_type,
                delivery.aggregate_id,
            )
            return None  # forged or corrupt: nothing to follow, never retried
        parent = await self.traces.load(linked.aggregate_id)
        info = parent.subtraces.get(linked.child_trace_id)
        if info is None or info.status != "running" or info.remote_id != linked.remote_id:
            return None  # already reported, or superseded by a later link
        name = info.remote or ""
        config = self.remote.configs.get(name)
        if config is None:
            status = failure(f"remote agent {name!r} is no longer configured here")
        else:
            try:
                status = await self.remote.status(name, linked.remote_id)
            except RemoteError as exc:
                if exc.transient and time.time() - linked.ts < config.give_up_s:
                    log.info("remote child %s: %s; asking again", linked.remote_id, exc)
                    return config.poll_s
                status = failure(str(exc))
            if status.status not in FINAL:
                return config.poll_s
        if await finish_remote(
            self.traces, parent, linked.child_trace_id, status, actor=self.actor
        ):
            await self.on_finished(parent)
        return None
