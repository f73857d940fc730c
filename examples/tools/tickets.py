"""Your own tools: a ticket system an agent can search and write to.

Load it into every executor with ``executor.tool_modules: [examples.tools.tickets]`` (or
``LONGHAUL_EXECUTOR__TOOL_MODULES=examples.tools.tickets``), grant it its settings, and name
the tools in a preset (or leave the preset's tool list open):

    tools:
      secrets:
        create_ticket: {url: TICKETS_URL, token: TICKETS_TOKEN}
        find_tickets: {url: TICKETS_URL, token: TICKETS_TOKEN}

Each tool reads only what was granted to it, from the executor's environment, as
``ctx.secrets``; the model never sees them. A call that changes the world sends its
idempotency key (stable when the executor re-runs the call after a crash), so a ticket system
that honours it files the ticket once.
"""

from __future__ import annotations

from typing import Literal

import httpx
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolContext, ToolResult, tool

TIMEOUT_S = 10.0


def _client(ctx: ToolContext) -> httpx.AsyncClient:
    try:
        url, token = ctx.secrets["url"], ctx.secrets["token"]
    except KeyError as missing:
        raise ToolError(
            f"the ticket system is not configured (tools.secrets lacks {missing})",
            code="not_configured",
        ) from None
    return httpx.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT_S
    )


@tool(effects="idempotent")  # the ticket system files one ticket per Idempotency-Key
async def create_ticket(
    ctx: ToolContext, title: str, body: str, priority: Literal["low", "normal", "high"] = "normal"
) -> ToolResult:
    """File a ticket in the team's ticket system.

    Args:
        title: one line saying what is wrong or wanted.
        body: the details a person needs to act on it.
        priority: how soon it needs attention.
    """
    async with _client(ctx) as client:
        response = await client.post(
            "/tickets",
            json={"title": title, "body": body, "priority": priority},
            headers={"Idempotency-Key": ctx.idempotency_key},
        )
    if response.status_code >= 400:
        raise ToolError(
            f"the ticket system refused the ticket ({response.status_code}): {response.text[:200]}",
            code="ticket_refused",
        )
    ticket = response.json()
    return ToolResult(
        output=f"filed ticket {ticket['id']}: {title}", title=f"ticket {ticket['id']}"
    )


@tool(read_only=True)
def word_count(text: str) -> str:
    """Count the words of a text (a plain function: no context, no I/O).

    Args:
        text: the text to count.
    """
    return str(len(text.split()))


@tool(read_only=True)
async def find_tickets(ctx: ToolContext, query: str) -> str:
    """Search the ticket system; one line per ticket, newest first.

    Args:
        query: words the ticket's title or body contains.
    """
    async with _client(ctx) as client:
        response = await client.get("/tickets", params={"q": query})
    response.raise_for_status()  # an unexpected failure: the harness reports it as a tool error
    found = response.json()
    return "\n".join(f"{t['id']} [{t['priority']}] {t['title']}" for t in found) or "no tickets"


TOOLS = [create_ticket, find_tickets, word_count]
