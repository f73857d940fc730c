"""A small real A2A agent built with ``a2a-sdk``'s server (its request handler, in-memory
task store and JSON-RPC routes), served by uvicorn in a thread of its own: what a longhaul
parent delegates to over ``protocol: a2a``.

Behaviour by the task's text: "ask" asks "which size?" (input-required) and completes with
"size noted: <answer>" once answered on the same task; "slow" works until ``gate`` is set;
"huge" completes with an artifact of ``HUGE`` characters (a hostile agent's answer);
anything else completes with "sdk did: <text>" as an artifact."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    TaskState,
)
from starlette.applications import Starlette

from tests.support.stack import eventually

HUGE = 2 * 1024 * 1024


@dataclass
class SdkAgent(AgentExecutor):
    gate: threading.Event = field(default_factory=threading.Event)
    received: list[str] = field(default_factory=list)
    """The text of every message the agent was sent (a resend would show twice)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        text = context.get_user_input()
        self.received.append(text)
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await self._finish(updater, f"size noted: {text}")
        elif "ask" in text:
            await updater.requires_input(new_text_message("which size?"))
        elif "huge" in text:
            await self._finish(updater, "x" * HUGE)
        else:
            if "slow" in text:
                await asyncio.to_thread(self.gate.wait, 60)
            await self._finish(updater, f"sdk did: {text}")

    async def _finish(self, updater: TaskUpdater, answer: str) -> None:
        await updater.add_artifact([Part(text=answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


@asynccontextmanager
async def serve_sdk_agent(interface: str | None = None) -> AsyncIterator[tuple[str, SdkAgent]]:
    """(base URL, agent) of the agent served on a loopback port until the block ends; its
    card names ``interface`` as where to call it, if given (a hostile card), else itself."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent = SdkAgent()
    card = AgentCard(
        name="sdk-agent",
        description="a2a-sdk test agent",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=interface or f"{url}/", protocol_binding="JSONRPC", protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="does it", tags=["test"])],
    )
    handler = DefaultRequestHandler(agent, InMemoryTaskStore(), agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        await eventually(lambda: _started(server), within=10)
        yield url, agent
    finally:
        agent.gate.set()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


async def _started(server: uvicorn.Server) -> bool | None:
    return True if server.started else None
