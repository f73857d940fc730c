"""``Tool`` and the ``@tool`` decorator (pydantic-ai style: the signature is the schema).

    @tool(read_only=True, path_params=("path",))
    async def read(ctx: ToolContext, path: str, offset: int = 1) -> ToolResult:
        '''Read a text file.

        Args:
            path: file path relative to the working directory.
            offset: first line to return (1-based).
        '''

The first paragraph of the docstring is the description the model sees; ``Args:`` entries
describe the parameters. A leading ``ctx: ToolContext`` parameter is injected, never offered.
A tool returns a ``str`` (shorthand for ``ToolResult(output=...)``), a :class:`ToolResult`, or
:class:`Deferred` when its answer arrives in a later turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, overload

from jsonschema import Draft202012Validator
from longhaul.agent.tools.context import ToolContext
from longhaul.agent.tools.docstring import parse_docstring
from longhaul.agent.tools.result import Deferred, ToolReply, ToolResult
from longhaul.agent.tools.schema import ArgsModel, args_model, json_schema, takes_context
from longhaul.domain.config import OnUnknown
from longhaul.llm.types import ToolSpec
from longhaul.llm.untrusted_schema import untrusted_validator

ToolFunction = Callable[..., Awaitable[str | ToolReply] | str | ToolReply]

Effects = Literal["none", "idempotent", "unsafe"]
"""What a call does outside the trace: nothing; something a repeat with the same idempotency
key does not do twice; or something that may happen twice if the call is run again."""

Reconcile = Callable[[ToolContext], Awaitable[str | ToolResult | None]]
"""Asked about a call cut off by a crash (``ctx.idempotency_key`` is the call's key): its
result if the effect happened (recorded as the call's answer), ``None`` if it did not (the
call runs once more with the same key). Raising leaves the decision to a person."""

Settle = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolResult]]
"""For an ``on_unknown="model"`` tool: what the model is told about its call (these
arguments) cut off by a crash, found by looking (a file compared with what the call meant to
write). Without it the model is told the call was cut off and its outcome is unknown."""


@dataclass(frozen=True, eq=False)
class Tool:
    """A callable the model may use.

    ``read_only`` tools change nothing outside the trace (``goal`` edits only the trace's own
    plan); they are the ones the ``explore`` preset and ``read_only`` traces keep.
    ``path_params`` name the arguments that are file paths, so the Guardrail can jail them
    before the tool runs.
    """

    name: str
    description: str
    fn: ToolFunction
    arguments: type[ArgsModel]
    input_schema: dict[str, Any]
    read_only: bool = False
    path_params: tuple[str, ...] = ()
    wants_context: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    effects: Effects | None = None
    """Declared effects; ``None``: ``none`` for a read-only tool, else ``unsafe``."""
    reconcile: Reconcile | None = None
    on_unknown: OnUnknown | None = None
    """A call cut off by a crash: ``model`` for tools whose effects stay in the trace's sandbox
    (the model is told, and inspects); ``None``: rerun if idempotent, the ``reconcile`` hook if
    any, else ask a person. The operator's ``tools.on_unknown`` overrides it."""
    settle: Settle | None = None

    @property
    def effect(self) -> Effects:
        """The declared effects, or what ``read_only`` implies."""
        if self.effects is not None:
            return self.effects
        return "none" if self.read_only else "unsafe"

    @cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.input_schema)

    @cached_property
    def validator(self) -> Draft202012Validator:
        """Schemas may be an MCP server's: nothing is fetched, patterns match in linear time."""
        validator: Draft202012Validator = untrusted_validator(self.input_schema)
        return validator

    async def run(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolReply:
        """Validate ``arguments`` with the pydantic model (coercion included) and call."""
        parsed = self.arguments.model_validate(arguments)
        values = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        result = self.fn(ctx, **values) if self.wants_context else self.fn(**values)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, ToolResult | Deferred):
            return result
        return ToolResult(output=str(result))


def make_tool(
    fn: ToolFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    path_params: tuple[str, ...] = (),
    effects: Effects | None = None,
    reconcile: Reconcile | None = None,
    on_unknown: OnUnknown | None = None,
    settle: Settle | None = None,
) -> Tool:
    tool_name = name or fn.__name__.rstrip("_")
    doc = parse_docstring(fn.__doc__)
    model = args_model(fn, tool_name, doc)
    unknown = set(path_params) - set(model.model_fields)
    if unknown:
        raise TypeError(f"tool {tool_name}: path_params {sorted(unknown)} are not parameters")
    if reconcile is not None and (effects == "none" or (effects is None and read_only)):
        raise TypeError(f"tool {tool_name}: reconcile is for tools with effects")
    if reconcile is not None and not inspect.iscoroutinefunction(reconcile):
        raise TypeError(f"tool {tool_name}: reconcile must be an async function")
    if settle is not None and on_unknown != "model":
        raise TypeError(f"tool {tool_name}: settle is for on_unknown='model' tools")
    return Tool(
        name=tool_name,
        description=description if description is not None else doc.description,
        fn=fn,
        arguments=model,
        input_schema=json_schema(model),
        read_only=read_only,
        path_params=path_params,
        wants_context=takes_context(fn),
        effects=effects,
        reconcile=reconcile,
        on_unknown=on_unknown,
        settle=settle,
    )


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    path_params: tuple[str, ...] = (),
    effects: Effects | None = None,
    reconcile: Reconcile | None = None,
    on_unknown: OnUnknown | None = None,
    settle: Settle | None = None,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool = False,
    path_params: tuple[str, ...] = (),
    effects: Effects | None = None,
    reconcile: Reconcile | None = None,
    on_unknown: OnUnknown | None = None,
    settle: Settle | None = None,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Turn a function into a :class:`Tool`; usable bare (``@tool``) or with options.
    ``effects``: see :data:`Effects` (default: ``none`` if ``read_only``, else ``unsafe``).
    ``reconcile``: see :data:`Reconcile` (without it, an ``unsafe`` call cut off by a crash
    waits for a person). ``on_unknown``/``settle``: see :class:`Tool` and :data:`Settle`."""

    def decorate(function: ToolFunction) -> Tool:
        return make_tool(
            function,
            name=name,
            description=description,
            read_only=read_only,
            path_params=path_params,
            effects=effects,
            reconcile=reconcile,
            on_unknown=on_unknown,
            settle=settle,
        )

    return decorate(fn) if fn is not None else decorate
