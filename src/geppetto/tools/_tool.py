"""``@tool``: a typed Python function as a tool a model can call.

The parameters' JSON schema comes from the type hints (through pydantic), the description from the
docstring. Arguments are validated before the call; the result is serialized for the model (a string
as it is, anything else as JSON).
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from .._exceptions import ToolDefinitionError
from ._context import ToolContext

if TYPE_CHECKING:
    import pydantic

__all__ = ["Tool", "ToolDefinition", "ToolReportedError", "serialize_result", "tool"]

OnInterrupted = Literal["retry", "fail", "ask"]
"""What happens to a tool call whose start is journaled but whose result is not (see :func:`tool`)."""

_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class ToolReportedError(Exception):
    """Raised by a tool to report a failure in its own words: the model reads the message as the tool's
    error, as it is (an MCP server's ``isError`` result arrives this way)."""


@dataclass(frozen=True)
class ToolDefinition:
    """What a provider needs to offer a tool to a model: ``name``, ``description`` and the JSON schema
    of its ``parameters`` (an object schema). Each engine maps it to its own wire format."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolDefinition:
        return cls(name=data["name"], description=data.get("description", ""), parameters=data.get("parameters", {}))


class Tool:
    """A function wrapped as a tool. Calling the tool calls the function unchanged.

    ``definition`` is what the model sees; :meth:`validate` turns model arguments into arguments by
    parameter name (raising :class:`pydantic.ValidationError`); :meth:`call` calls the function with
    them. ``retryable`` tools are retried with backoff by the executor. ``requires_approval`` (``True``
    or a predicate on the call's arguments) pauses the tool loop until a person decides (see
    ``docs/tools.md``); a ``client_side`` tool is run by the client, never here.
    """

    context_param: str | None = None
    """The name of the parameter that receives the :class:`~geppetto.ToolContext` (None: the tool takes none;
    MCP tools, which define their own ``__init__``, take none)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        retryable: bool = False,
        max_retries: int = 2,
        backoff_s: float = 0.1,
        timeout_s: float | None = None,
        requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
        client_side: bool = False,
        on_interrupted: OnInterrupted | None = None,
    ) -> None:
        if not callable(fn):
            raise ToolDefinitionError(f"{fn!r} is not a function; decorate a function with @tool")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not self.name or not set(self.name) <= _NAME_OK or len(self.name) > 64:
            raise ToolDefinitionError(
                f"tool name {self.name!r} is not usable: providers accept 1-64 letters, digits, '_' or '-'; "
                "pass @tool(name='...')"
            )
        # A callable object with `async def __call__` is async too.
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(cast(Any, fn).__call__)
        self.retryable = retryable
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        if not (isinstance(requires_approval, bool) or callable(requires_approval)):
            raise ToolDefinitionError(
                f"tool {self.name}: requires_approval must be True/False or a predicate on the arguments "
                f"(e.g. lambda args: args['amount'] > 100), not {requires_approval!r}"
            )
        self.requires_approval = requires_approval
        """``True``, or a predicate on the call's arguments: a person approves the call before it runs."""
        self.client_side = client_side
        if on_interrupted not in (None, "retry", "fail", "ask"):
            raise ToolDefinitionError(
                f"tool {self.name}: on_interrupted must be 'retry', 'fail' or 'ask', not {on_interrupted!r}"
            )
        self.on_interrupted: OnInterrupted | None = on_interrupted
        """What a pickup does with a call of this tool that started and never returned (the process running it
        stopped): ``"retry"`` runs it again, ``"fail"`` answers with an error, ``"ask"`` holds it for approval.
        None: ``"fail"`` when the tool needs approval, else ``"retry"`` (docs/persistence.md)."""
        """The client runs this tool (see :func:`~geppetto.tools.client_tool`); its body never runs here."""
        self._model, self.context_param = _args_model(fn, self.name)
        self._positional = tuple(
            p.name for p in inspect.signature(fn).parameters.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY
        )
        schema = self._model.model_json_schema()
        schema.pop("title", None)
        self.definition = ToolDefinition(
            name=self.name,
            description=description if description is not None else _summary(fn),
            parameters=schema,
        )

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments for the function, validated and converted (nested models are built)."""
        model = self._model.model_validate(args)
        return {str(info.alias): getattr(model, name) for name, info in type(model).model_fields.items()}

    def call(self, arguments: dict[str, Any]) -> Any:
        """Call the function with ``arguments`` by parameter name (as :meth:`validate` returns them),
        passing positional-only parameters by position. For an async function this is the coroutine."""
        if not self._positional:
            return self.fn(**arguments)
        rest = dict(arguments)
        args = []
        for pname in self._positional:
            if pname not in rest:
                break  # the remaining positional-only parameters take their defaults
            args.append(rest.pop(pname))
        return self.fn(*args, **rest)


def _summary(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].strip()


def _args_model(fn: Callable[..., Any], tool_name: str) -> tuple[type[pydantic.BaseModel], str | None]:
    """A pydantic model of ``fn``'s parameters, and the name of its first parameter when that one takes
    the :class:`~geppetto.ToolContext` (left out of the model); :class:`ToolDefinitionError` for anything
    a model could not supply as JSON."""
    import pydantic  # loaded by the first tool made, not by `import geppetto`

    fname = getattr(fn, "__qualname__", tool_name)
    params = inspect.signature(fn).parameters
    hints = _parameter_hints(fn, fname, list(params))
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for index, (pname, param) in enumerate(params.items()):
        if hints.get(pname) is ToolContext:
            if index:
                raise ToolDefinitionError(
                    f"tool {fname}: parameter {pname!r} takes the ToolContext, which only the first parameter "
                    f"can; move it first, e.g. `def {getattr(fn, '__name__', 'f')}({pname}: ToolContext, ...)`"
                )
            context_param = pname
            continue
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            star, example = (
                ("*", "list[str]") if param.kind is inspect.Parameter.VAR_POSITIONAL else ("**", "dict[str, str]")
            )
            raise ToolDefinitionError(
                f"tool {fname}: parameter {star}{pname} takes any number of arguments, which a JSON schema "
                f"cannot describe; use named, typed parameters, or one like `{pname}: {example}`"
            )
        if pname not in hints:
            raise ToolDefinitionError(
                f"tool {fname}: parameter {pname!r} has no type hint; annotate it, e.g. `{pname}: str`"
            )
        annotation = hints[pname]
        try:
            pydantic.TypeAdapter(annotation).json_schema()
        except pydantic.PydanticUserError as exc:
            raise ToolDefinitionError(
                f"tool {fname}: parameter {pname!r} has type {annotation!r}, which has no JSON schema; "
                "use JSON-friendly types (str, int, float, bool, list, dict, enums, pydantic models)"
            ) from exc
        default = ... if param.default is inspect.Parameter.empty else param.default
        # Internal field names with the parameter name as alias: a parameter may be called `json`,
        # `model_x` or `_x`, which pydantic would otherwise warn about or treat as private.
        fields[f"p{len(fields)}"] = (annotation, pydantic.Field(default, alias=pname))
    config = pydantic.ConfigDict(extra="forbid")
    model: type[pydantic.BaseModel] = pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)
    return model, context_param


def _parameter_hints(fn: Callable[..., Any], fname: str, names: list[str]) -> dict[str, Any]:
    """The resolved type hints of ``fn``'s parameters ``names``. When the hints do not resolve as a
    whole, each parameter's is resolved alone to name the one at fault (an unresolvable return hint
    does not matter: a tool's result is serialized whatever its type)."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else cast(Any, fn).__call__
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception:  # diagnosed per parameter below
        pass
    raw: dict[str, Any] = dict(getattr(target, "__annotations__", None) or {})
    globalns = getattr(inspect.unwrap(target), "__globals__", {})
    hints: dict[str, Any] = {}
    for pname in names:
        if pname not in raw:
            continue
        alone = types.SimpleNamespace(__annotations__={pname: raw[pname]})
        try:
            hints.update(typing.get_type_hints(alone, globalns=globalns, include_extras=True))
        except Exception as exc:
            raise ToolDefinitionError(
                f"tool {fname}: the type hint of parameter {pname!r} ({raw[pname]!r}) cannot be resolved "
                f"({exc}); define or import that type at module level where {fname} is defined"
            ) from exc
    return hints


def serialize_result(value: Any) -> str:
    """A tool's return value as the text the model reads: a string as it is, anything else as JSON
    (pydantic models, dataclasses, dates and enums included; NaN and infinities as the strings ``"NaN"``,
    ``"Infinity"`` and ``"-Infinity"``, since JSON has no such numbers)."""
    if isinstance(value, str):
        return value
    import pydantic_core  # loaded with the tool's pydantic model; not by `import geppetto`

    return pydantic_core.to_json(value, inf_nan_mode="strings").decode("utf-8")


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    retryable: bool = False,
    max_retries: int = 2,
    backoff_s: float = 0.1,
    timeout_s: float | None = None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
    on_interrupted: OnInterrupted | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    retryable: bool = False,
    max_retries: int = 2,
    backoff_s: float = 0.1,
    timeout_s: float | None = None,
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False,
    on_interrupted: OnInterrupted | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed function (sync or async) into a :class:`Tool`.

    Use bare (``@tool``) or with options (``@tool(name=..., retryable=True, timeout_s=5)``).
    ``timeout_s`` overrides the executor's per-call timeout for this tool; ``retryable`` tools are
    retried up to ``max_retries`` times after a failure, waiting ``backoff_s * 2**attempt`` (but a sync
    tool is not retried after a timeout: its abandoned thread may still be running).
    ``requires_approval=True`` (or a predicate on the arguments, e.g. ``lambda a: a["amount"] > 100``)
    makes the tool loop stop with the call pending until a person approves or denies it
    (``session.pending_approvals``, ``await session.resume({call_id: True})``).
    ``on_interrupted`` says what a run picked up by another worker or process does with a call of this tool
    that started and never returned: ``"retry"`` (run it again), ``"fail"`` (the model reads that it was
    interrupted) or ``"ask"`` (it waits for approval); by default ``"fail"`` for a tool that needs approval,
    ``"retry"`` otherwise. A call whose result was journaled never runs again (docs/persistence.md).
    Positional-only parameters are fine (they are passed by position). Raises
    :class:`ToolDefinitionError` naming the function and parameter when a parameter has no type hint,
    a hint that does not resolve, a type JSON cannot express, or is ``*args``/``**kwargs``.

    >>> @tool
    ... def add(a: int, b: int = 1) -> int:
    ...     '''Add two numbers.'''
    ...     return a + b
    >>> add.definition.description
    'Add two numbers.'
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            retryable=retryable,
            max_retries=max_retries,
            backoff_s=backoff_s,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            on_interrupted=on_interrupted,
        )

    return wrap(fn) if fn is not None else wrap
