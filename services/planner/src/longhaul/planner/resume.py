"""Answer a resume request: decide which phases are done and where the task goes on.

Checkpoints are read first. A phase whose checkpoint says completed but whose
``phase_completed`` never reached the log (the planner died between the two) is completed from
the checkpoint. Phases whose checkpoint expired are taken from the event log. The ``resumed``
event records the source (``checkpoint``, ``event_log`` or ``mixed``), the skipped phases and
the first unfinished layer, from which scheduling continues as usual: phases there that are
still running keep their live step traces, the others start again.
"""

from __future__ import annotations

import asyncio

from longhaul.core.checkpoints import Checkpoints
from longhaul.domain import events as ev
from longhaul.domain.state import TaskState


async def resume_events(task: TaskState, checkpoints: Checkpoints) -> list[ev.TaskEvent]:
    loaded = await asyncio.gather(*(checkpoints.load(task.task_id, pid) for pid in task.order))
    saved = {
        pid: checkpoint
        for pid, checkpoint in zip(task.order, loaded, strict=True)
        if checkpoint is not None and checkpoint.status == "completed"
    }
    events: list[ev.TaskEvent] = []
    done: set[str] = set()
    for pid in task.order:
        phase = task.phases[pid]
        if phase.status == "completed":
            done.add(pid)
        elif pid in saved and phase.status == "running":
            checkpoint = saved[pid]
            events.append(
                ev.PhaseCompleted(
                    phase_id=pid,
                    output_ref=checkpoint.result_ref,
                    summary=checkpoint.summary,
                    trace_id=checkpoint.trace_id,
                )
            )
            done.add(pid)
    skipped = [pid for pid in task.order if pid in done]
    confirmed = [pid for pid in skipped if pid in saved]
    if skipped and len(confirmed) == len(skipped):
        source = "checkpoint"
    elif confirmed:
        source = "mixed"
    else:
        source = "event_log"
    resumed_at: list[str] = []
    if task.order:
        for layer in task.layers():
            unfinished = [pid for pid in layer if pid not in done]
            if unfinished:
                resumed_at = unfinished
                break
    events.append(ev.Resumed(source=source, skipped=skipped, resumed_at=resumed_at))
    return events
