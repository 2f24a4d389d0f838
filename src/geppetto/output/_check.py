"""Validating an answer: parsing it, checking it against the schema (pydantic for a type, jsonschema for a
dict), and recording the value or the errors on the answer's block."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .._exceptions import UsageError
from .._json import parse_json
from ..turns import Block, BlockKind, Turn
from ._config import (
    BLOCK_META_OUTPUT,
    BLOCK_META_OUTPUT_ERRORS,
    STRUCTURED_OUTPUT,
    WRAP_KEY,
    StructuredOutputConfig,
    _remember,
    _unwrapped,
)

_Validator = Callable[[Any], list[str]]


_VALIDATORS: OrderedDict[str, _Validator] = OrderedDict()
_ADAPTERS: OrderedDict[str, Any] = OrderedDict()
"""The pydantic adapter of each schema made from a type (by ``schema_id``): its answers are checked by it."""


def _validator(config: StructuredOutputConfig) -> _Validator:
    found = _VALIDATORS.get(config.schema_id)
    if found is not None:
        return found
    adapter = _ADAPTERS.get(config.schema_id)
    check = (
        _pydantic_validator(adapter) if adapter is not None else _jsonschema_validator(config.schema, config.wrapped)
    )
    _remember(_VALIDATORS, config.schema_id, check)
    return check


def _where(loc: Any) -> str:
    parts = [str(p) for p in loc]
    return ".".join(parts) or "(answer)"


def _pydantic_validator(adapter: Any) -> _Validator:
    import pydantic

    def check(value: Any) -> list[str]:
        try:
            adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            return [f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors()]
        return []

    return check


def _jsonschema_validator(schema: dict[str, Any], wrapped: bool) -> _Validator:
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - jsonschema is a dependency
        raise UsageError("validating against a JSON schema dict needs jsonschema: pip install jsonschema") from exc
    import referencing

    if wrapped:
        schema = _unwrapped(schema)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise UsageError(f"the structured output schema is not a valid JSON schema: {exc.message}") from exc
    # An empty registry: a reference the schema does not hold is an error, never a download (jsonschema's
    # default fetches http: and file: URLs). check_schema refuses such references before this.
    validator = cls(schema, registry=referencing.Registry())

    def check(value: Any) -> list[str]:
        try:
            found = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
        except RecursionError:  # a recursive schema and an answer nested nearly as deep as JSON may go
            return ["(answer): nested too deeply to check against the schema; answer with less nesting"]
        return [f"{_where(e.absolute_path)}: {e.message}" for e in found]

    return check


def check_output(config: StructuredOutputConfig, text: str) -> tuple[Any, list[str]]:
    """Parse and validate ``text`` as an answer for ``config``: ``(value, [])`` when it is valid (the
    value unwrapped when the schema was wrapped), ``(None, errors)`` when not."""
    try:
        value = parse_json(text)
    except ValueError as exc:
        detail = f"{exc.msg} at char {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return None, [f"the answer is not valid JSON ({detail})"]
    if config.wrapped:
        if not isinstance(value, dict) or WRAP_KEY not in value:
            return None, [f"(answer): expected an object with the answer under {WRAP_KEY!r}"]
        value = value[WRAP_KEY]
    errors = _validator(config)(value)
    return (None, errors) if errors else (value, [])


READ_FROM_TURN: Any = object()
"""``settle_output``'s default: read the config from the turn (an engine that read it already passes it)."""


def settle_output(turn: Turn, blocks: list[Block], config: Any = READ_FROM_TURN) -> None:
    """Record the answer in ``blocks`` (one inference's new blocks, already in ``turn``) when ``turn``
    asks for structured output (``config``, read from the turn unless given): the value on the last
    text block, or the errors. A step that called tools is not an answer yet and is left alone. Engines
    call this once per inference."""
    if config is READ_FROM_TURN:
        config = STRUCTURED_OUTPUT.get(turn.data)
    if config is None or any(b.kind is BlockKind.TOOL_CALL for b in blocks):
        return
    texts = [b for b in blocks if b.kind is BlockKind.LLM_TEXT]
    if not texts:
        return
    text = "".join(b.text for b in texts)
    value, errors = check_output(config, text)
    target = texts[-1]
    if errors:
        BLOCK_META_OUTPUT_ERRORS.set(target.metadata, errors)
        BLOCK_META_OUTPUT.delete(target.metadata)
    else:
        if _plain_json(text):
            target.metadata[_OUTPUT_KEY] = value  # fresh from the parser and plain JSON: no check or copy needed
        else:
            BLOCK_META_OUTPUT.set(target.metadata, value)  # names what JSON cannot hold, e.g. NaN
        target.metadata.pop(_ERRORS_KEY, None)


_OUTPUT_KEY, _ERRORS_KEY = str(BLOCK_META_OUTPUT), str(BLOCK_META_OUTPUT_ERRORS)
_LONG_NUMBER = re.compile(r"\d{1000}")


def _plain_json(text: str) -> bool:
    """Whether parsed ``text`` is certainly plain JSON: no NaN or infinity (the parser takes them) and no
    integer too long for Python to write back as text (a false alarm only costs the full check)."""
    if "NaN" in text or "Infinity" in text:
        return False
    return len(text) < 1000 or _LONG_NUMBER.search(text) is None
