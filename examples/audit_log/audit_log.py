"""An operator's middleware, added by configuration alone: one JSON line per tool call (who,
which trace, which tool, arguments, outcome, duration) appended to a file.

```yaml
pipeline:
  middleware:
    - name: AuditLog
      use: examples.audit_log.audit_log:AuditLog   # or an entry point in longhaul.middleware
      before: Guardrail                            # sees calls the guardrail refuses too
      options: {path: /var/log/longhaul/audit.jsonl}
```
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from longhaul.agent import Middleware
from longhaul.agent.errors import ToolError
from longhaul.agent.invocation import ToolInvocation
from longhaul.agent.middleware.base import ToolHandler
from longhaul.agent.tools.result import Deferred, ToolReply
from longhaul.agent.turn import Turn


class AuditLog(Middleware):
    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    async def wrap_tool_call(
        self, turn: Turn, invocation: ToolInvocation, call_next: ToolHandler
    ) -> ToolReply:
        started = time.monotonic()
        try:
            reply = await call_next(invocation)
        except ToolError as exc:  # refused inside (guardrail, validation): record, pass on
            await self._record(turn, invocation, exc.code, started)
            raise
        if isinstance(reply, Deferred):
            outcome = f"deferred: {reply.reason}"
        else:
            outcome = reply.error_code or "ok"
        await self._record(turn, invocation, outcome, started)
        return reply

    async def _record(
        self, turn: Turn, invocation: ToolInvocation, outcome: str, started: float
    ) -> None:
        record = {
            "ts": round(time.time(), 3),
            "trace_id": turn.trace_id,
            "owner": turn.state.owner,
            "tool": invocation.name,
            "tool_call_id": invocation.call.id,
            "arguments": invocation.call.arguments,
            "outcome": outcome,
            "duration_ms": int((time.monotonic() - started) * 1000),
        }
        await asyncio.to_thread(self._append, json.dumps(record) + "\n")

    def _append(self, line: str) -> None:
        with self.path.open("a") as out:
            out.write(line)
