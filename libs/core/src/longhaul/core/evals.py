"""The ``lh_evals`` KV bucket: eval runs filed under their API key.

Keys, all below the owner (``longhaul.core.experiences.owner_segment``), so one key's evals
are never reached through another's:

- ``<owner>.<eval id>`` — the :class:`~longhaul.domain.evals.EvalRecord` (the gateway);
- ``<owner>.<eval id>.run.<run key>`` — one scored run, a
  :class:`~longhaul.domain.evals.RunResult` (the gateway, as the client reports it);
- ``<owner>.<eval id>.check.<trace id>`` — what a task's ``check`` did in a run's working
  directory, a :class:`~longhaul.domain.evals.CheckOutcome` (the verifier).

One key per run and per check: concurrent runs never race on a shared record, and a restart
finds every finished run by listing the eval's keys (``--resume``).
"""

from __future__ import annotations

import msgspec
from longhaul.core.connection import Connection
from longhaul.core.experiences import owner_segment
from longhaul.core.kv import get_entry
from longhaul.core.kvscan import current_entries
from longhaul.domain.evals import CheckOutcome, EvalRecord, RunResult
from longhaul.domain.ids import is_valid_id
from nats.js.kv import KeyValue

EVAL_PREFIX = "ev"


class EvalStore:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def _kv(self) -> KeyValue:
        return await self.conn.kv(self.conn.names.evals)

    @staticmethod
    def _key(owner: str | None, eval_id: str, *rest: str) -> str:
        if not is_valid_id(eval_id, EVAL_PREFIX) or not all(is_valid_id(p) for p in rest):
            raise ValueError(f"invalid eval key {eval_id!r} {rest!r}")
        return ".".join((owner_segment(owner), eval_id, *rest))

    async def create(self, owner: str | None, record: EvalRecord) -> None:
        kv = await self._kv()
        await kv.create(self._key(owner, record.eval_id), msgspec.json.encode(record))

    async def get(self, owner: str | None, eval_id: str) -> EvalRecord | None:
        kv = await self._kv()
        entry = await get_entry(kv, self._key(owner, eval_id))
        if entry is None or not entry.value:
            return None
        return msgspec.json.decode(entry.value, type=EvalRecord)

    async def owned(self, owner: str | None) -> list[EvalRecord]:
        """Every eval of ``owner``, newest first (ids are ULIDs)."""
        kv = await self._kv()
        entries = await current_entries(kv, f"{owner_segment(owner)}.*")
        records = [msgspec.json.decode(e.value or b"", type=EvalRecord) for e in entries]
        return sorted(records, key=lambda r: r.eval_id, reverse=True)

    async def put_run(self, owner: str | None, eval_id: str, key: str, run: RunResult) -> None:
        kv = await self._kv()
        await kv.put(self._key(owner, eval_id, "run", key), msgspec.json.encode(run))

    async def run(self, owner: str | None, eval_id: str, key: str) -> RunResult | None:
        """One scored run by its key (``longhaul.domain.evals.run_key``)."""
        kv = await self._kv()
        entry = await get_entry(kv, self._key(owner, eval_id, "run", key))
        if entry is None or not entry.value:
            return None
        return msgspec.json.decode(entry.value, type=RunResult)

    async def runs(self, owner: str | None, eval_id: str) -> list[RunResult]:
        kv = await self._kv()
        entries = await current_entries(kv, self._key(owner, eval_id, "run") + ".*")
        return [msgspec.json.decode(e.value or b"", type=RunResult) for e in entries]

    async def put_check(self, owner: str | None, eval_id: str, outcome: CheckOutcome) -> None:
        kv = await self._kv()
        key = self._key(owner, eval_id, "check", outcome.trace_id)
        await kv.put(key, msgspec.json.encode(outcome))

    async def check(self, owner: str | None, eval_id: str, trace_id: str) -> CheckOutcome | None:
        kv = await self._kv()
        entry = await get_entry(kv, self._key(owner, eval_id, "check", trace_id))
        if entry is None or not entry.value:
            return None
        return msgspec.json.decode(entry.value, type=CheckOutcome)
