"""The ``replay:<trace id>`` model: every model call answered from a recorded trace.

An eval replay (``longhaul eval --replay``) starts each run on the recorded run's trace id;
here that trace and its local sub-traces are read from the log and played back as a script
(``longhaul.domain.replay``): a run — or a sub-agent, found by the task it is given — gets
the recorded turns in order, without a model call. A model string can also reach a
sub-agent through the ``agent`` tool, so a recording is only ever played to a trace of the
key that owns it; any other id answers like one that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from longhaul.core.lru import Lru
from longhaul.core.repository import Repository
from longhaul.domain.ids import is_valid_id
from longhaul.domain.messages import content_text
from longhaul.domain.replay import Turn, recording, replayed_trace
from longhaul.domain.state import TraceState
from longhaul.llm.scripted import ScriptedModel, TurnScript
from longhaul.llm.types import ModelRequest

MAX_FAMILY = 500
"""Sub-traces read for one recording (a family larger than this plays its first ones)."""
CACHED = 64


class NoRecording(ValueError):
    """The model string names no recording this trace may play."""


class RecordedScript:
    """Turns by task: a request plays the recording of the first of its user messages that
    was a recorded task (harness-written messages before it do not hide it)."""

    UNKNOWN_TASK: Turn = {"content": "replay: no recorded run was given this task"}

    def __init__(self, by_prompt: dict[str, list[Turn]]) -> None:
        self.scripts = {prompt: TurnScript(turns) for prompt, turns in by_prompt.items()}

    def __call__(self, request: ModelRequest) -> Turn:
        for message in request.messages:
            if message.get("role") == "user":
                script = self.scripts.get(content_text(message.get("content")))
                if script is not None:
                    return script(request)
        return self.UNKNOWN_TASK


class Recordings:
    """Builds replay models from the log; a recording is final, so it is read once."""

    def __init__(self, traces: Repository[TraceState]) -> None:
        self.traces = traces
        self._scripts: Lru[str, tuple[str | None, RecordedScript]] = Lru(CACHED)
        """By recorded trace: its owner and its script (a recording never changes)."""

    async def model(self, state: TraceState, model_string: str) -> ScriptedModel:
        recorded_id = replayed_trace(model_string)
        script = await self._script(state.owner, recorded_id)
        return ScriptedModel(script, name=model_string)

    async def _script(self, owner: str | None, recorded_id: str | None) -> RecordedScript:
        unknown = NoRecording(f"no recorded trace {recorded_id!r} to replay")
        if recorded_id is None or not is_valid_id(recorded_id):
            raise unknown
        cached = self._scripts.get(recorded_id)
        if cached is None:
            root = await self.traces.load(recorded_id)
            if not root.exists:
                raise unknown
            cached = root.owner, RecordedScript(recording(await self._family(root)))
            self._scripts.put(recorded_id, cached)
        recorded_owner, script = cached
        if recorded_owner != owner:
            raise unknown
        return script

    async def _family(self, root: TraceState) -> Sequence[TraceState]:
        family = [root]
        queue = [root]
        while queue and len(family) < MAX_FAMILY:
            state = queue.pop(0)
            for child in state.subtraces.values():
                if child.remote is not None or len(family) >= MAX_FAMILY:
                    continue
                loaded = await self.traces.load(child.child_trace_id)
                if loaded.exists and loaded.owner == root.owner:
                    family.append(loaded)
                    queue.append(loaded)
        return family
