"""Remote sub-agents: a child trace run by another longhaul (config ``remote_agents``).

Starting: on the parent's ``subtrace_spawned`` (``remote`` set) the executor creates the trace
on the remote gateway over HTTP (``POST /api/traces``, or ``POST …/run`` for a
``continue_from``) and appends ``remote_subtrace_linked`` {``agent://host:port/<id>``} to the
parent; a refusal (401, 404, 422), a timeout or an unreachable host ends the child at once as
``failed`` with the reason, so the parent gets a clear tool result and never hangs.

Waiting holds no worker: each ``remote_subtrace_linked`` is a message of a second durable
consumer (unlimited deliveries). A delivery asks the remote once for the trace's status; not
finished yet, the message is handed back with a delay (``poll_s``), so the wait lives in
JetStream and any executor, including one restarted after a crash, picks it up. Finished, the
parent gets ``subtrace_finished`` with the remote summary and usage. A remote that stays
unreachable for ``give_up_s`` fails the child. A crash between the remote's answer and the
link leaves an orphan trace on the remote (the spawn is retried and creates another); that is
the one window not covered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import nats.errors
from longhaul.core.consumer import Fetcher
from longhaul.core.eventlog import EventLog
from longhaul.domain import events as ev
from longhaul.domain.config import RemoteAgentConfig
from longhaul.domain.names import Names
from longhaul.domain.state import SubtraceInfo, TraceState
from longhaul.executor.appends import append_while
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

log = logging.getLogger(__name__)

FINAL = frozenset({"completed", "failed", "stopped"})
SUMMARY_LIMIT = 4000


class RemoteError(Exception):
    """A remote call that cannot succeed as is; ``transient``: worth asking again later."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class RemoteStatus:
    status: str
    summary: str
    tokens: int
    cost: float


def remote_id(config: RemoteAgentConfig, trace_id: str) -> str:
    return f"agent://{urlsplit(config.url).netloc}/{trace_id}"


def remote_trace_id(linked: str) -> str:
    return linked.rsplit("/", 1)[-1]


class RemoteAgents:
    """HTTP to the configured remote gateways (one client, every call bounded)."""

    def __init__(self, configs: dict[str, RemoteAgentConfig]) -> None:
        self.configs = configs
        self._http = httpx.AsyncClient(follow_redirects=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(
        self, name: str, method: str, path: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        config = self.configs.get(name)
        if config is None:
            raise RemoteError(f"remote agent {name!r} is not configured here")
        key = os.environ.get(config.api_key_env) if config.api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        where = f"remote agent {name!r} ({config.url.rstrip('/')})"
        try:
            response = await self._http.request(
                method,
                config.url.rstrip("/") + path,
                json=body,
                headers=headers,
                timeout=config.timeout_s,
            )
        except httpx.TimeoutException as exc:
            raise RemoteError(
                f"{where} timed out after {config.timeout_s} s", transient=True
            ) from exc
        except httpx.HTTPError as exc:
            raise RemoteError(f"{where} is unreachable: {exc}", transient=True) from exc
        if response.status_code in (401, 403):
            raise RemoteError(f"{where} refused our API key ({response.status_code})")
        if response.status_code == 404:
            raise RemoteError(f"{where} has no such trace (404)")
        if response.status_code in (429, 502, 503, 504):
            raise RemoteError(f"{where} is busy ({response.status_code})", transient=True)
        if response.status_code >= 400:
            raise RemoteError(f"{where} answered {response.status_code}: {_error(response)}")
        data: dict[str, Any] = response.json()
        return data

    async def start(self, info: SubtraceInfo, name: str) -> str:
        """Create (or continue) the remote trace; returns its ``agent://`` id."""
        messages = [{"role": "user", "content": info.task}]
        if info.remote_id is not None:
            trace_id = remote_trace_id(info.remote_id)
            await self._call(name, "POST", f"/api/traces/{trace_id}/run", {"messages": messages})
        else:
            body = {"messages": messages, "preset": info.preset, "name": f"remote {info.mode}"}
            trace_id = str((await self._call(name, "POST", "/api/traces", body))["trace_id"])
        return remote_id(self.configs[name], trace_id)

    async def stop(self, name: str, linked: str) -> None:
        await self._call(name, "POST", f"/api/traces/{remote_trace_id(linked)}/stop")

    async def status(self, name: str, linked: str) -> RemoteStatus:
        view = await self._call(name, "GET", f"/api/traces/{remote_trace_id(linked)}")
        status = str(view.get("status", "failed"))
        usage = view.get("run_usage") or {}
        summary = view.get("summary") or view.get("error") or view.get("stop_reason") or ""
        if status == "failed":
            summary = f"failed: {summary}"
        elif status == "stopped":
            summary = f"stopped: {summary or 'stop requested'}"
        return RemoteStatus(
            status=status,
            summary=str(summary)[:SUMMARY_LIMIT],
            tokens=int(usage.get("tokens", 0)),
            cost=float(usage.get("cost", 0.0)),
        )


def _error(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])[:500]
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


async def finish_remote(
    store: EventLog, parent: TraceState, child: str, status: RemoteStatus, *, actor: str
) -> bool:
    """Append the remote child's end to the parent (once)."""
    finished = ev.SubtraceFinished(
        child_trace_id=child,
        status=status.status if status.status in FINAL else "failed",  # type: ignore[arg-type]
        summary=status.summary,
        tokens=status.tokens,
        cost=status.cost,
    )
    return await append_while(store, parent, finished, lambda p: _running(p, child), actor=actor)


def _running(parent: TraceState, child: str) -> bool:
    info = parent.subtraces.get(child)
    return info is not None and info.status == "running"


def failure(message: str) -> RemoteStatus:
    return RemoteStatus(status="failed", summary=f"failed: {message}", tokens=0, cost=0.0)


class RemoteWaits:
    """The durable wait: follows every linked remote child until it ends (see module doc)."""

    def __init__(
        self,
        js: JetStreamContext,
        names: Names,
        store: EventLog,
        remote: RemoteAgents,
        *,
        durable: str,
        actor: str,
        ack_wait_s: float,
        on_finished: Any,
    ) -> None:
        self.js = js
        self.names = names
        self.store = store
        self.remote = remote
        self.durable = durable
        self.actor = actor
        self.ack_wait_s = ack_wait_s
        self.on_finished = on_finished

    async def run(self, shutdown: asyncio.Event) -> None:
        config = api.ConsumerConfig(
            name=self.durable,
            durable_name=self.durable,
            description="longhaul executors: waits on remote sub-agents",
            deliver_policy=api.DeliverPolicy.ALL,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait_s,
            max_deliver=-1,
            filter_subjects=[self.names.type_filter("trace", "remote_subtrace_linked")],
        )
        await self.js.add_consumer(self.names.stream, config)
        sub = await self.js.pull_subscribe_bind(durable=self.durable, stream=self.names.stream)
        fetcher = Fetcher(sub, idle_timeout_s=1.0)
        try:
            while not shutdown.is_set():
                try:
                    messages = await fetcher.next(limit=8)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                except nats.errors.Error as exc:
                    log.warning("remote waits: fetch failed: %s", exc)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(shutdown.wait(), 1.0)
                    continue
                await asyncio.gather(*(self._handle(msg) for msg in messages))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _handle(self, msg: Msg) -> None:
        try:
            delay = await self._check(msg)
        except Exception:
            log.exception("remote wait %s failed; retrying", msg.subject)
            delay = 5.0
        with contextlib.suppress(nats.errors.Error, OSError):
            if delay is None:
                await msg.ack()
            else:
                await msg.nak(delay=delay)

    async def _check(self, msg: Msg) -> float | None:
        """``None``: the wait is over; else ask again after that many seconds."""
        try:
            linked = ev.decode(msg.data)
        except ev.EventDecodeError:
            linked = None
        if not isinstance(linked, ev.RemoteSubtraceLinked) or not linked.aggregate_id:
            log.warning(
                "remote waits: dropping %s, not a remote_subtrace_linked event", msg.subject
            )
            return None  # forged or corrupt: nothing to follow, never retried
        parent = await self.store.load_trace(linked.aggregate_id)
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
        if await finish_remote(self.store, parent, linked.child_trace_id, status, actor=self.actor):
            await self.on_finished(parent)
        return None
