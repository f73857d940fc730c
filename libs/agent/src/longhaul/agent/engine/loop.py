"""The ReAct loop of one turn.

Entry: a trace that is not running has nothing to do (a waiting one is only stopped if a stop
was requested). Then the turn's settings are resolved and pinned (``turn_settings``,
``run_context``), ``before_agent``, a pending stop request, what arrived while the trace
waited (``take_arrivals``), a requested reflection. Then, step by step: stop request → final
answer at the head (complete or verify) → iteration budget → room in the stores → request →
``before_model`` → model call (wrapped; cut short by the shell's stop signal,
``interrupt``; a provider outage moves to the next model of the chain, ``fallback``) →
``after_model`` → assistant message (+ queued
events) → tool calls, each result recorded before the next call acts. Write-behind: a result's
append is in flight while the next model request is built and sent, and an assistant
message's while its calls run if none of them changes anything outside the trace
(``read_only``); each is settled before the next append or a call with effects. A crash
therefore loses at most the call in flight. ``after_agent`` sees every outcome once
``before_agent`` ran; then an unnamed trace whose run ended is titled (``titling``).
"""

from __future__ import annotations

from longhaul.agent.contract import TurnOutcome
from longhaul.agent.engine.arrivals import take_arrivals
from longhaul.agent.engine.compaction import summarise
from longhaul.agent.engine.cut import refuse_cut_call, unfinished_answer
from longhaul.agent.engine.endings import ask_budget, fail, finish, is_final_answer, stop
from longhaul.agent.engine.fallback import guarded, switch_model
from longhaul.agent.engine.interrupt import unless_stopped
from longhaul.agent.engine.model_call import streaming_call
from longhaul.agent.engine.reflection import reflect
from longhaul.agent.engine.titling import title, wants_title
from longhaul.agent.engine.tool_calls import innermost, run_calls, run_tool_calls
from longhaul.agent.engine.uploads import deliver_uploads
from longhaul.agent.errors import TurnConfigError
from longhaul.agent.middleware.chain import MiddlewareChain
from longhaul.agent.run_context import settle
from longhaul.agent.stop_reasons import MAX_ITERATIONS, STOP_REQUESTED, STORAGE_FULL
from longhaul.agent.turn import Step, Turn, elapsed_ms
from longhaul.llm.types import ModelError


class TurnLoop:
    def __init__(self, turn: Turn, chain: MiddlewareChain) -> None:
        self.turn = turn
        self.chain = chain
        self.call_model = chain.model_handler(turn, streaming_call(turn))
        self.call_tool = chain.tool_handler(turn, innermost(turn))
        turn.reflect = lambda: reflect(turn, self.call_tool)
        turn.summarise = lambda keep: summarise(turn, self.call_tool, keep)

    async def run(self) -> TurnOutcome:
        turn, state = self.turn, self.turn.state
        if state.status == "waiting":
            if state.stop_requested:
                return await stop(turn, STOP_REQUESTED)
            return TurnOutcome(end="waiting")
        if state.status is None:
            raise ValueError("run_turn needs an existing trace (no trace_created applied)")
        if state.status != "running":
            return TurnOutcome(end=state.status, stop_reason=state.stop_reason)
        outcome = await self._run()
        await self.chain.after_agent(turn, outcome)
        if wants_title(turn, outcome):
            await title(turn)
        return outcome

    async def _run(self) -> TurnOutcome:
        turn, state = self.turn, self.turn.state
        try:
            await settle(turn)
            await self.chain.before_agent(turn)
        except TurnConfigError as exc:
            return await fail(turn, str(exc), "config_error")
        if state.stop_requested:
            return await stop(turn, STOP_REQUESTED)
        outcome = await take_arrivals(turn)
        if outcome is None:
            outcome = await self._decided_calls()
        if outcome is None:
            outcome = await self._unsettled_effects()
        if state.reflect_requested and outcome is None:
            await reflect(turn, self.call_tool)
        while outcome is None:
            outcome = await self._step()
        return outcome

    async def _decided_calls(self) -> TurnOutcome | None:
        """Calls that waited for approval and now have a decision go through the chain again:
        the approval gate runs the approved ones and answers the denied ones."""
        state = self.turn.state
        decided = [
            call
            for call in state.unanswered_tool_calls()
            if call.id in state.tool_decisions or call.id in state.client_results
        ]
        if not decided:
            return None
        return await run_calls(self.turn, decided, self.call_tool)

    async def _unsettled_effects(self) -> TurnOutcome | None:
        """Calls cut off while acting (the effect ledger): an ``idempotent`` one is run again
        with its first idempotency key, never the model asked; an ``unsafe`` one waits for a
        person's decision (the approval gate). The model sees one result per call."""
        state = self.turn.state
        cut_off = [c for c in state.unsettled_effects() if c.id not in state.tool_decisions]
        if not cut_off:
            return None
        return await run_calls(self.turn, cut_off, self.call_tool)

    async def _step(self) -> TurnOutcome | None:
        turn, state = self.turn, self.turn.state
        if state.stop_requested:
            return await stop(turn, STOP_REQUESTED)
        head = state.messages.get(state.head_sequence)
        cut = await unfinished_answer(turn, head)
        if cut is not None:
            return cut
        if is_final_answer(head):
            assert head is not None
            finished = await finish(turn, head)
            if finished is not None:
                return finished
        if state.run_usage.iterations >= turn.max_iterations:
            return await stop(turn, MAX_ITERATIONS, end="max_iterations")
        # the last step's calls are answered; the headroom of the stores pays for the stop
        if turn.env.storage_full is not None and await turn.env.storage_full():
            return await stop(turn, STORAGE_FULL)
        await deliver_uploads(turn)
        request = turn.request()
        await self.chain.before_model(turn, request)
        if turn.stop_reason is not None:
            return await stop(turn, turn.stop_reason)
        if turn.budget_ask is not None:
            return await ask_budget(turn, turn.budget_ask)
        started = turn.env.clock()
        try:
            response = await guarded(
                turn, lambda: unless_stopped(turn, lambda: self.call_model(request))
            )
        except ModelError as exc:
            if await switch_model(turn, exc):
                return None  # the step again, built for the next model of the chain
            return await fail(turn, f"model call failed: {exc}", "model_error")
        turn.steps += 1
        if turn.model_params.parallel_tool_calls is False:  # a provider without the switch
            del response.tool_calls[1:]
        step = Step(
            request=request, response=response, duration_ms=elapsed_ms(turn.env.clock, started)
        )
        await self.chain.after_model(turn, step)
        refuse_cut_call(step)
        batch = turn.batch()
        calls = list(response.tool_calls)
        batch.message(
            "assistant",
            content=response.content if response.content or not calls else None,
            tool_calls=calls or None,
            usage=step.usage,
            cost=step.cost,
            duration_ms=step.duration_ms,
            model=response.model or turn.model.name,
            finish_reason=response.finish_reason,
            provider_fields=response.provider_fields or None,
        )
        for event in step.events:
            batch.add(event)
        # Calls that change nothing outside the trace may act before the message asking for
        # them is stored (after a crash they would simply be asked for and run again): it
        # goes with their first result, one batch and one round trip for the step.
        await turn.emit(batch, hold=bool(calls) and all(turn.is_read_only(c) for c in calls))
        if turn.stop_reason is not None:
            return await stop(turn, turn.stop_reason)
        if not calls:
            return None
        return await run_tool_calls(turn, step, self.call_tool)
