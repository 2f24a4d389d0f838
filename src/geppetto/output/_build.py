"""Building a config from a type or a schema (each type prepared once), and reading the answer back."""

from __future__ import annotations

import re
from typing import Any, TypeVar, overload

from .._exceptions import UsageError
from ..turns import Block, BlockKind, Turn
from ._check import _ADAPTERS
from ._config import (
    BLOCK_META_OUTPUT,
    BLOCK_META_OUTPUT_ERRORS,
    WRAP_KEY,
    OutputValidationError,
    StructuredOutputConfig,
    _remember,
)

T = TypeVar("T")


class _Prepared:
    """A type's schema and validator, worked out once."""

    __slots__ = ("adapter", "schema", "wrapped")

    def __init__(self, adapter: Any, schema: dict[str, Any], wrapped: bool) -> None:
        self.adapter = adapter
        self.schema = schema
        self.wrapped = wrapped


_PREPARED: dict[Any, _Prepared] = {}


def _prepare(target: Any) -> _Prepared:
    found = _PREPARED.get(target)
    if found is not None:
        return found
    import pydantic

    try:
        adapter = pydantic.TypeAdapter(target)
        schema = adapter.json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise UsageError(
            f"{target!r} has no JSON schema: use a pydantic model, dataclass, TypedDict, or a JSON schema dict ({exc})"
        ) from exc
    schema, wrapped = _rooted(schema)
    prepared = _Prepared(adapter, schema, wrapped)
    _PREPARED[target] = prepared
    return prepared


def _rooted(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``schema`` with an object at its root, and whether it had to be wrapped for that. A root that only
    refers to an object definition (pydantic's form for a recursive model) takes that definition's place."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, dict) and len(schema) == 2:
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, dict) and target.get("type") == "object":
            return {**target, "$defs": defs}, False
    if schema.get("type") == "object":
        return schema, False
    return _wrap(schema), True


def _wrap(schema: dict[str, Any]) -> dict[str, Any]:
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {WRAP_KEY: inner},
        "required": [WRAP_KEY],
        "additionalProperties": False,
    }
    if defs is not None:
        wrapped["$defs"] = defs
    return wrapped


def _default_name(target: Any) -> str:
    if isinstance(target, dict):
        raw = str(target.get("title") or "output")
    else:
        raw = str(getattr(target, "__name__", "") or "output")
    name = re.sub(r"[^A-Za-z0-9_-]", "_", str(raw))[:64]
    return name or "output"


def output_config(
    target: Any,
    *,
    name: str | None = None,
    strict: bool = True,
    description: str | None = None,
    require_valid: bool = False,
    max_retries: int = 2,
    mode: str = "auto",
) -> StructuredOutputConfig:
    """A config asking for answers of ``target``: a pydantic model, dataclass, TypedDict or any type
    pydantic can describe (``list[Item]``, ``Literal[...]``), or a JSON schema dict. A type's schema and
    validator are prepared once and reused; answers are validated by pydantic for a type and by
    ``jsonschema`` for a dict. ``name`` defaults to the type's name (or the schema's ``title``)."""
    if isinstance(target, StructuredOutputConfig):
        return target
    if isinstance(target, dict):
        schema, wrapped = _rooted(target)
        adapter = None
    else:
        prepared = _prepare(target)
        schema, wrapped, adapter = prepared.schema, prepared.wrapped, prepared.adapter
    config = StructuredOutputConfig(
        name=name or _default_name(target),
        schema=schema,
        strict=strict,
        description=description,
        require_valid=require_valid,
        max_retries=max_retries,
        mode=mode,
        wrapped=wrapped,
    )
    if adapter is not None and config.schema_id not in _ADAPTERS:
        _remember(_ADAPTERS, config.schema_id, adapter)
    return config


def output_block(turn: Turn) -> Block | None:
    """The block holding the turn's latest answer (its last text block, when it follows the last user
    block), or ``None``."""
    for block in reversed(turn.blocks):
        if block.kind is BlockKind.LLM_TEXT:
            return block
        if block.kind in (BlockKind.USER, BlockKind.TOOL_CALL, BlockKind.TOOL_USE):
            return None
    return None


@overload
def output_of(turn: Turn) -> Any: ...
@overload
def output_of(turn: Turn, type_: type[T]) -> T: ...


def output_of(turn: Turn, type_: Any = None) -> Any:
    """The turn's structured answer: the JSON value, or built as ``type_`` (a model, dataclass, ...).

    Raises :class:`OutputValidationError` when the answer was recorded as invalid (its ``errors`` say
    why) and :class:`~geppetto.UsageError` when the turn holds no structured answer."""
    block = output_block(turn)
    if block is None or (str(BLOCK_META_OUTPUT) not in block.metadata and not _has_errors(block)):
        raise UsageError(
            "this turn holds no structured answer: run it with output=... (Session.run(text, output=Model)) "
            "or set STRUCTURED_OUTPUT in its data"
        )
    errors = BLOCK_META_OUTPUT_ERRORS.get(block.metadata)
    if errors:
        raise OutputValidationError(
            "the answer does not match the schema: " + "; ".join(str(e) for e in errors),
            text=block.text,
            errors=[str(e) for e in errors],
            turn=turn,
        )
    value = BLOCK_META_OUTPUT.get(block.metadata)
    if type_ is None:
        return value
    return _prepare(type_).adapter.validate_python(value)


def _has_errors(block: Block) -> bool:
    return str(BLOCK_META_OUTPUT_ERRORS) in block.metadata


def retry_prompt(errors: list[str]) -> str:
    """What the model is told when its answer did not match the schema."""
    listed = "\n".join(f"- {e}" for e in errors[:20])
    more = f"\n- ... and {len(errors) - 20} more" if len(errors) > 20 else ""
    return (
        "Your previous answer does not match the required JSON schema:\n"
        f"{listed}{more}\n"
        "Answer again with only the JSON value, matching the schema exactly."
    )
