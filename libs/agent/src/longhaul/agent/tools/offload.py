"""Large tool outputs: the whole output goes to the workspace (and so, past the KV's size
limit, to the ``lh_artifacts`` object store); the model gets the head and the tail, the true
size and a key it can page through with ``workspace_read(key, offset, length)``.

An offloaded output is a one-time output: the model sees head and tail in the request right
after the call, and from then on only the notice (size, key, how to page), so a long run does
not carry every large output it ever saw.

The key is ``outputs/<trace_id>/<tool_call_id>``: one per call, rewritten identically when a
call is re-run after a crash. The gateway serves it whole at
``GET /api/traces/{id}/outputs/{tool_call_id}``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from longhaul.agent.tools.context import ToolContext

log = logging.getLogger(__name__)

NOTICE_RESERVE = 600
"""Characters of the cap kept for the notices between head and tail and after them."""


def output_key(trace_id: str, tool_call_id: str) -> str:
    return f"outputs/{trace_id}/{tool_call_id}"


@dataclass(frozen=True)
class Fitted:
    """What the model is shown, and for an offloaded output the notice that replaces it
    once shown (``None``: the output is whole)."""

    text: str
    notice: str | None = None


async def fit_output(ctx: ToolContext, data: bytes, total: int, *, unit: str = "bytes") -> Fitted:
    """``data`` as the model should see it: whole if it fits ``output_cap``, else head and
    tail around a notice giving the true size (``total``; more than ``len(data)`` when the
    capture itself stopped) and where the whole is stored."""
    cap = ctx.settings.output_cap
    if total <= cap and len(data) == total:
        return Fitted(data.decode("utf-8", errors="replace"))
    key: str | None = None
    if ctx.workspace is not None:
        key = output_key(ctx.trace_id, ctx.tool_call_id)
        try:
            await ctx.workspace.put(key, data)
        except Exception as exc:  # the model still gets head and tail, without a reference
            log.warning("could not store the output of %s: %s", ctx.idempotency_key, exc)
            key = None
    half = max((cap - NOTICE_RESERVE) // 2, 0)
    head = data[:half].decode("utf-8", errors="replace")
    tail = data[-half:].decode("utf-8", errors="replace") if half else ""
    omitted = max(len(data) - 2 * half, 0)
    if key is None:
        where = "the whole output could not be stored"
    else:
        stored = "the whole output" if len(data) == total else f"its first {len(data)} {unit}"
        where = (
            f"{stored} is in the workspace: workspace_read(key={key!r}, offset=<character>, "
            "length=<characters>)"
        )
    notice = (
        f"\n… [output is {total} {unit} in all; {omitted} {unit} omitted here between the "
        f"first and the last {half}; {where}] …\n"
    )
    if len(data) < total:
        notice += f"[capture stopped after {len(data)} {unit}; the tail shown ends there]\n"
    return Fitted(head + notice + tail, notice.strip())
