"""Removing an erased trace's working directory (the gateway erases everything else).

The gateway asks on ``Names.erasures`` (``longhaul.domain.erasure``); every executor removes
its copy of ``<working root>/keys/<owner>/<scope>`` and answers. The owner and scope are
checked like a trace's own (:func:`longhaul.agent.workdir.key_home`), so a request can never
name a directory outside the keys' tree.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import msgspec
from longhaul.agent.workdir import WorkingDirError, key_home
from longhaul.domain.erasure import WorkdirErased, WorkdirErasure
from nats.aio.msg import Msg

log = logging.getLogger(__name__)


class WorkdirEraser:
    def __init__(self, working_root: Path) -> None:
        self.root = working_root.resolve()

    async def remove(self, request: WorkdirErasure) -> bool:
        """Remove the directory; False when there was none."""
        home = key_home(self.root, request.owner, request.scope)
        if not home.is_dir():
            return False
        await asyncio.to_thread(shutil.rmtree, home)
        log.info("removed the working directory of erased %s", request.scope)
        return True

    async def on_request(self, msg: Msg) -> None:
        try:
            request = msgspec.json.decode(msg.data, type=WorkdirErasure)
            removed = await self.remove(request)
        except (msgspec.DecodeError, msgspec.ValidationError, WorkingDirError, OSError) as exc:
            log.warning("refused a working directory erasure: %s", exc)
            return
        if msg.reply:
            await msg.respond(msgspec.json.encode(WorkdirErased(removed=removed)))
