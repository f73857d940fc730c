"""Tools with effects that must happen once: a payment service an agent charges, refunds and
pays out through. Each shows one way the effect ledger keeps a crash from doing it twice.

    LONGHAUL_EXECUTOR__TOOL_MODULES=examples.tools.payments
    tools:
      secrets:
        charge: {url: PAYMENTS_URL, token: PAYMENTS_TOKEN}
        refund: {url: PAYMENTS_URL, token: PAYMENTS_TOKEN}
        payout: {url: PAYMENTS_URL, token: PAYMENTS_TOKEN}

- ``charge`` is ``idempotent``: the service applies one charge per ``Idempotency-Key``, so
  after a crash the executor runs the call again with the same key and the model never knows.
- ``refund`` is ``unsafe`` (the service refunds every request) but has a ``reconcile`` hook:
  after a crash the service is asked whether the key's refund happened; if it did, its answer
  is the call's result, if not, the call runs once more.
- ``payout`` is ``unsafe`` with no way to ask: after a crash the trace waits for a person to
  say "run it again", "it took effect" or "it failed" (``longhaul traces show`` lists it).
"""

from __future__ import annotations

from typing import Any

import httpx
from longhaul.agent.errors import ToolError
from longhaul.agent.tools import ToolContext, ToolResult, tool

TIMEOUT_S = 30.0


async def _send(ctx: ToolContext, method: str, path: str, **request: Any) -> httpx.Response:
    """One request to the payment service, authenticated with what the operator granted."""
    try:
        url, token = ctx.secrets["url"], ctx.secrets["token"]
    except KeyError as missing:
        raise ToolError(
            f"the payment service is not configured (tools.secrets lacks {missing})",
            code="not_configured",
        ) from None
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": ctx.idempotency_key}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=TIMEOUT_S) as client:
        response = await client.request(method, path, **request)
    if response.status_code >= 400 and response.status_code != 404:
        raise ToolError(
            f"the payment service refused ({response.status_code}): {response.text[:200]}",
            code="payment_refused",
        )
    return response


def _receipt(kind: str, response: httpx.Response) -> ToolResult:
    done = response.json()
    return ToolResult(
        output=f"{kind} {done['id']}: {done['amount']} cents", title=f"{kind} {done['id']}"
    )


@tool(effects="idempotent")  # the service applies one charge per Idempotency-Key
async def charge(ctx: ToolContext, amount: int, customer: str) -> ToolResult:
    """Charge a customer's card.

    Args:
        amount: how much, in cents.
        customer: the customer's id.
    """
    response = await _send(ctx, "POST", "/charges", json={"amount": amount, "customer": customer})
    return _receipt("charge", response)


async def _refunded(ctx: ToolContext) -> ToolResult | None:
    """Whether the refund with this call's key happened (the service can tell, by key)."""
    response = await _send(ctx, "GET", f"/refunds/{ctx.idempotency_key}")
    return None if response.status_code == 404 else _receipt("refund", response)


@tool(effects="unsafe", reconcile=_refunded)
async def refund(ctx: ToolContext, amount: int, customer: str) -> ToolResult:
    """Refund a customer (every request refunds: never call twice for one refund).

    Args:
        amount: how much, in cents.
        customer: the customer's id.
    """
    response = await _send(ctx, "POST", "/refunds", json={"amount": amount, "customer": customer})
    return _receipt("refund", response)


@tool(effects="unsafe")
async def payout(ctx: ToolContext, amount: int, account: str) -> ToolResult:
    """Pay money out to a bank account (the service cannot tell whether a payout happened).

    Args:
        amount: how much, in cents.
        account: the bank account.
    """
    response = await _send(ctx, "POST", "/payouts", json={"amount": amount, "account": account})
    return _receipt("payout", response)


TOOLS = [charge, refund, payout]
