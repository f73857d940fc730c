"""`longhaul-verifier`: answers verification requests of traces and phases.

Replicas share one durable consumer (competing consumers) on ``verification_requested``, and
another on ``completed`` for the checks of eval runs (:mod:`longhaul.verifier.eval_checks`).
"""

from __future__ import annotations

import asyncio
import logging

from longhaul.agent.config_check import check_config
from longhaul.core.consumer import ConsumerSpec, consume
from longhaul.core.service import ServiceContext, run_main
from longhaul.llm.registry import ModelRegistry
from longhaul.verifier.command_spool import prune
from longhaul.verifier.eval_checks import EvalChecks
from longhaul.verifier.handler import Verifier
from longhaul.verifier.ledger import VerdictLedger

log = logging.getLogger(__name__)

DURABLE = "verifier"
EVAL_DURABLE = "verifier-evals"


def consumer_spec(ctx: ServiceContext) -> ConsumerSpec:
    return ConsumerSpec(
        durable=DURABLE,
        subjects=[ctx.conn.names.type_filter("trace", "verification_requested")],
        concurrency=4,
    )


def eval_consumer_spec(ctx: ServiceContext) -> ConsumerSpec:
    return ConsumerSpec(
        durable=EVAL_DURABLE,
        subjects=[ctx.conn.names.type_filter("trace", "completed")],
        concurrency=4,
    )


async def run(ctx: ServiceContext) -> None:
    async with ModelRegistry(ctx.config.models) as models:
        ledger = VerdictLedger(ctx.conn, ttl_s=ctx.config.store.lease_ttl_s)
        verifier = Verifier(ctx.traces, models, ctx.config, ledger)
        pruned = await asyncio.to_thread(prune, verifier.runs_dir)
        if pruned:
            log.info("removed %d stale verification spools", pruned)
        sandbox = verifier.sandbox
        log.log(sandbox.log_level(), "command checks: %s", sandbox.describe())
        checks = EvalChecks(ctx.traces, ctx.evals, verifier)
        async with asyncio.TaskGroup() as group:  # one failing stops the other
            group.create_task(consume(ctx.conn, consumer_spec(ctx), verifier.handle, ctx.shutdown))
            group.create_task(
                consume(ctx.conn, eval_consumer_spec(ctx), checks.handle, ctx.shutdown)
            )


def main() -> None:
    run_main("verifier", run, check=check_config)


if __name__ == "__main__":
    main()
