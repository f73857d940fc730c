# mypy: ignore-errors
# (written against a2a-sdk 0.3, which the workspace does not hold; mypy sees 1.x)
"""Run by test_a2a_conformance inside a venv holding a2a-sdk 0.3.26 (not the workspace's 1.x):
a 0.3 client finds the agent by its base URL alone and sends one message. Prints the task as
JSON."""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TextPart


async def main(base_url: str, key: str, model: str) -> None:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    client = await ClientFactory.connect(
        base_url, client_config=ClientConfig(httpx_client=http, streaming=False)
    )
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.user,
        parts=[Part(root=TextPart(text="say hello"))],
        metadata={"model": model},
    )
    async for event in client.send_message(message):
        task = event[0] if isinstance(event, tuple) else event
        print(json.dumps(task.model_dump(mode="json", exclude_none=True)))
    await client.close()


asyncio.run(main(*sys.argv[1:]))
