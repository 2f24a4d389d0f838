"""Structured output: the answer as JSON matching a schema, parsed and validated.

A :class:`StructuredOutputConfig` in ``Turn.data`` (:data:`STRUCTURED_OUTPUT`) asks every engine for an
answer matching its schema, each through its provider's own mechanism (Responses ``text.format``, Chat
``response_format``, Claude ``output_config.format`` or a forced tool, Gemini ``responseJsonSchema``).
The engine parses and validates the final answer and records the value on the answer's last text block
(:data:`BLOCK_META_OUTPUT`), or what is wrong with it (:data:`BLOCK_META_OUTPUT_ERRORS`). The
:func:`~geppetto.middleware.structured_output` middleware (every :class:`~geppetto.Session` runs it)
retries an invalid answer with the errors told to the model when ``require_valid`` is set.

Build a config with :func:`output_config` from a pydantic model, dataclass, TypedDict, any type
pydantic can describe, or a JSON schema dict; read the answer with :func:`output_of`. Schemas are
prepared once per type, and each provider's wire form once per schema (:func:`wire_schema`).
"""

from __future__ import annotations

import contextlib
import json
import operator
import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from ._exceptions import GeppettoError, UsageError
from ._json import EncodedJSON, parse_json
from ._output_schema import check_schema, schema_too_deep
from .turns import Block, BlockKind, Turn, block_meta_key, turn_data_key

__all__ = [
    "BLOCK_META_OUTPUT",
    "BLOCK_META_OUTPUT_ERRORS",
    "READ_FROM_TURN",
    "STRUCTURED_OUTPUT",
    "Dialect",
    "OutputValidationError",
    "StructuredOutputConfig",
    "check_output",
    "output_block",
    "output_config",
    "output_of",
    "retry_prompt",
    "settle_output",
    "wire_schema",
    "wire_schema_encoded",
]

T = TypeVar("T")

MODES = ("auto", "native", "tool")
WRAP_KEY = "value"
"""The property a non-object answer is wrapped in on the wire (providers want an object at the root)."""

_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass
class StructuredOutputConfig:
    """What the answer must look like.

    ``name`` (1-64 letters, digits, ``_``, ``-``) names the schema on the wire; ``schema`` is the JSON
    schema of the answer as given (providers get a rewritten copy, see :func:`wire_schema`); ``strict``
    asks the provider to enforce it (OpenAI's strict mode). ``require_valid``: an answer that does not
    parse or validate is retried up to ``max_retries`` times with the errors told to the model, then
    raises :class:`OutputValidationError`; when false the raw text and the errors are kept. ``mode``
    is for Claude: ``"native"`` (``output_config.format``), ``"tool"`` (a forced tool whose input is the
    answer, for models without native structured output) or ``"auto"`` (native on models that have it).
    ``wrapped``: the schema's root was not an object, so the wire schema wraps it in ``{"value": ...}``
    and the answer is unwrapped. ``schema_id`` identifies the schema's content (filled in when empty).
    """

    name: str
    schema: dict[str, Any]
    strict: bool = True
    description: str | None = None
    require_valid: bool = False
    max_retries: int = 2
    mode: str = "auto"
    wrapped: bool = False
    schema_id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_OK.match(self.name):
            raise UsageError(
                f"structured output name {self.name!r} is not usable: providers accept 1-64 letters, digits, "
                "'_' or '-'; pass output_config(..., name='answer')"
            )
        if not isinstance(self.schema, dict):
            raise UsageError(f"structured output schema must be a JSON schema dict, got {type(self.schema).__name__}")
        if self.mode not in MODES:
            raise UsageError(f"structured output mode {self.mode!r} is unknown; use one of {', '.join(MODES)}")
        if self.max_retries < 0:
            raise UsageError("max_retries must be 0 or more")
        schema_id = _checked(self.schema, self.wrapped)
        if not self.schema_id:
            self.schema_id = schema_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "schema": self.schema,
            "strict": self.strict,
            "description": self.description,
            "require_valid": self.require_valid,
            "max_retries": self.max_retries,
            "mode": self.mode,
            "wrapped": self.wrapped,
            "schema_id": self.schema_id,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StructuredOutputConfig:
        """The config stored as ``data``. Engines read it on every request and every run stores a fresh
        copy, so decodings are kept by content: stored settings equal to an earlier decoding's (the schema
        by its ``schema_id``) give that same config back, which is therefore read-only."""
        try:
            key = _SETTINGS(data)
        except KeyError:  # written by hand, or by an older version: decoded in full
            return cls._from_dict(data)
        config = _DECODED.get(key) if isinstance(key[0], str) and key[0] else None
        if config is None:
            config = cls._from_dict(data)
            if key[0] == config.schema_id:
                with contextlib.suppress(TypeError):  # an unhashable setting: not kept
                    _remember(_DECODED, key, config)
        return config

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> StructuredOutputConfig:
        description = data.get("description")
        schema = data.get("schema")
        return cls(
            name=str(data.get("name") or "output"),
            schema=schema if isinstance(schema, dict) else {},
            strict=bool(data.get("strict", True)),
            description=str(description) if description is not None else None,
            require_valid=bool(data.get("require_valid", False)),
            max_retries=int(data.get("max_retries", 2)),
            mode=str(data.get("mode", "auto")),
            wrapped=bool(data.get("wrapped", False)),
            schema_id=str(data.get("schema_id") or ""),
        )


_FIELDS = ("schema_id", "name", "strict", "description", "require_valid", "max_retries", "mode", "wrapped")
_SETTINGS = operator.itemgetter(*_FIELDS)
_DECODED: OrderedDict[tuple[Any, ...], StructuredOutputConfig] = OrderedDict()

STRUCTURED_OUTPUT = turn_data_key("geppetto", "structured_output_config", 1, StructuredOutputConfig)
"""``geppetto.structured_output_config@v1``: the answer's schema; every engine honours it."""
BLOCK_META_OUTPUT = block_meta_key("geppetto", "output", 1, object)
"""``geppetto.output@v1`` on the answer's last text block: the parsed, validated value (plain JSON)."""
BLOCK_META_OUTPUT_ERRORS = block_meta_key("geppetto", "output_errors", 1, list)
"""``geppetto.output_errors@v1`` on the answer's last text block: why it is not a valid answer."""


class OutputValidationError(GeppettoError):
    """The answer did not match the schema after every retry. ``text`` is the raw answer, ``errors``
    what is wrong with it, ``turn`` the turn as it ended (the invalid answers and the retry prompts
    included), so nothing is lost."""

    def __init__(self, message: str, *, text: str, errors: list[str], turn: Turn | None = None) -> None:
        self.text = text
        self.errors = errors
        self.turn = turn
        super().__init__(message)


# -- building a config ------------------------------------------------------------------------------

_Validator = Callable[[Any], list[str]]


class _Prepared:
    """A type's schema and validator, worked out once."""

    __slots__ = ("adapter", "schema", "wrapped")

    def __init__(self, adapter: Any, schema: dict[str, Any], wrapped: bool) -> None:
        self.adapter = adapter
        self.schema = schema
        self.wrapped = wrapped


_PREPARED: dict[Any, _Prepared] = {}
_VALIDATORS: OrderedDict[str, _Validator] = OrderedDict()
_WIRE: OrderedDict[tuple[str, str], Any] = OrderedDict()
_ADAPTERS: OrderedDict[str, Any] = OrderedDict()
_CACHE_SIZE = 256


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


_CHECKED: OrderedDict[tuple[str, bool], None] = OrderedDict()


def _checked(schema: dict[str, Any], wrapped: bool) -> str:
    """The id of ``schema``'s content, once it passed :func:`check_schema` as sent and, when ``wrapped``, as
    validated (the answer inside the wrapper is a document of its own there). Checked once per content."""
    import hashlib  # only when a config is made, not at import

    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        raise schema_too_deep(None) from None
    schema_id = hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    if (schema_id, wrapped) not in _CHECKED:
        check_schema(schema, text)
        if wrapped:
            check_schema(_unwrapped(schema), None)
        _remember(_CHECKED, (schema_id, wrapped), None)
    return schema_id


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


# -- validating an answer ----------------------------------------------------------------------------


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


def _unwrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of the answer inside a wrapped schema (see :func:`_wrap`), as its own document."""
    inner = schema.get("properties", {}).get(WRAP_KEY)
    inner = dict(inner) if isinstance(inner, dict) else {}
    if "$defs" in schema:
        inner["$defs"] = schema["$defs"]
    return inner


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


# -- the schema each provider is sent ------------------------------------------------------------------

Dialect = Literal["openai", "anthropic", "gemini", "gemini-openapi"]

_COMMON = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
_COMMON |= {"$ref", "$defs", "description", "title"}
_KEEP: dict[str, set[str]] = {
    # OpenAI strict mode: https://platform.openai.com/docs/guides/structured-outputs (supported schemas).
    "openai": _COMMON
    | {"pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minItems", "maxItems"},
    # Claude's structured outputs: no numeric or string-length constraints, minItems of 0 or 1 only.
    "anthropic": _COMMON | {"allOf", "format"},
    # Gemini's responseJsonSchema subset.
    "gemini": _COMMON | {"format", "minItems", "maxItems", "minimum", "maximum", "prefixItems", "oneOf"},
}
_HINTED = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength"}
_HINTED |= {"pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties"}
"""Constraints a provider cannot enforce, kept in the description when removed (the answer is checked anyway)."""
_ANTHROPIC_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
_OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def wire_schema(config: StructuredOutputConfig, dialect: Dialect) -> dict[str, Any]:
    """The schema as ``dialect``'s provider takes it, worked out once per schema and dialect.

    ``openai``: strict mode's rules when ``config.strict`` (every object closed with
    ``additionalProperties: false``, every property required, optional ones made nullable by the type
    already, keywords strict mode refuses removed); the schema as given otherwise. ``anthropic``: objects
    closed, unsupported keywords removed. ``gemini``: the ``responseJsonSchema`` subset. ``gemini-openapi``:
    the older ``responseSchema`` form (references inlined, ``nullable`` instead of a null type). Keywords
    removed here are still checked when the answer is validated. A mapping with free keys
    (``dict[str, X]``) cannot be closed and is a :class:`~geppetto.UsageError` in strict dialects.
    """
    key = (config.schema_id, f"{dialect}:{config.strict}")
    found: dict[str, Any] | None = _WIRE.get(key)
    if found is not None:
        return found
    if dialect == "openai" and not config.strict:
        out = config.schema
    elif dialect == "gemini-openapi":
        out = _to_openapi(config.schema, config.schema, (), set())
    else:
        out = _rewrite(config.schema, dialect, (), close=dialect != "gemini", all_required=dialect == "openai")
    _remember(_WIRE, key, out)
    return out


def wire_schema_encoded(config: StructuredOutputConfig, dialect: Dialect) -> EncodedJSON:
    """:func:`wire_schema`, encoded once: what the engines put in request bodies, so a schema's JSON text
    is made once per schema and not on every request."""
    key = (config.schema_id, f"{dialect}:{config.strict}:encoded")
    found: EncodedJSON | None = _WIRE.get(key)
    if found is None:
        found = EncodedJSON(wire_schema(config, dialect))
        _remember(_WIRE, key, found)
    return found


def _path(path: tuple[str, ...]) -> str:
    return "/".join(path) or "(root)"


def _rewrite(node: Any, dialect: str, path: tuple[str, ...], *, close: bool, all_required: bool) -> Any:
    if not isinstance(node, dict):
        return node
    keep = _KEEP[dialect]
    node = dict(node)
    if "$ref" in node:  # siblings of a reference are dropped (strict mode wants it alone)
        out_ref: dict[str, Any] = {"$ref": node["$ref"]}
        if "$defs" in node:
            out_ref["$defs"] = _rewrite_map(node["$defs"], dialect, (*path, "$defs"), close, all_required)
        return out_ref
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "allOf" not in keep:
        node.pop("allOf")
        merged = dict(all_of[0]) if isinstance(all_of[0], dict) else {}
        merged.update({k: v for k, v in node.items() if k != "allOf"})
        return _rewrite(merged, dialect, path, close=close, all_required=all_required)
    if "oneOf" in node and "oneOf" not in keep:
        node["anyOf"] = node.pop("oneOf")
    if "const" in node and dialect == "gemini":
        node["enum"] = [node.pop("const")]
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for k, v in node.items():
        if k not in keep:
            if k in _HINTED:
                dropped.append(f"{k}: {json.dumps(v)}")
            continue
        if k == "format" and dialect in ("openai", "anthropic"):
            allowed = _OPENAI_FORMATS if dialect == "openai" else _ANTHROPIC_FORMATS
            if v not in allowed:
                dropped.append(f"format: {json.dumps(v)}")
                continue
        if k == "properties" and isinstance(v, dict):
            out[k] = {
                name: _rewrite(sub, dialect, (*path, name), close=close, all_required=all_required)
                for name, sub in v.items()
            }
        elif k == "$defs" and isinstance(v, dict):
            out[k] = _rewrite_map(v, dialect, (*path, "$defs"), close, all_required)
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = _rewrite(v, dialect, (*path, k), close=close, all_required=all_required)
        elif k in ("anyOf", "allOf", "oneOf", "prefixItems") and isinstance(v, list):
            out[k] = [
                _rewrite(sub, dialect, (*path, f"{k}[{i}]"), close=close, all_required=all_required)
                for i, sub in enumerate(v)
            ]
        else:
            out[k] = v
    if dialect == "anthropic" and out.get("minItems") not in (None, 0, 1):
        dropped.append(f"minItems: {out.pop('minItems')}")
    if dropped:  # the provider cannot enforce these; say them, so the model may follow them
        hint = "{" + ", ".join(dropped) + "}"
        out["description"] = f"{out['description']}\n\n{hint}" if out.get("description") else hint
    is_object = out.get("type") == "object" or "properties" in out
    if is_object and close:
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            raise UsageError(
                f"structured output: the object at {_path(path)} takes free keys (a dict[str, ...] mapping), "
                "which strict structured output cannot express; use a list of key/value objects, "
                "or output_config(..., strict=False) on OpenAI"
            )
        out["additionalProperties"] = False
        out.setdefault("properties", {})
        if all_required:
            out["required"] = list(out["properties"])
    return out


def _rewrite_map(defs: Any, dialect: str, path: tuple[str, ...], close: bool, all_required: bool) -> Any:
    if not isinstance(defs, dict):
        return defs
    return {
        name: _rewrite(sub, dialect, (*path, name), close=close, all_required=all_required)
        for name, sub in defs.items()
    }


_OPENAPI_KEEP = {"type", "format", "description", "nullable", "enum", "properties", "required", "items"}
_OPENAPI_KEEP |= {"minItems", "maxItems", "minimum", "maximum", "anyOf", "title", "propertyOrdering"}


def _to_openapi(node: Any, root: dict[str, Any], path: tuple[str, ...], seen: set[str]) -> Any:
    """``node`` in Gemini's OpenAPI-3.0 Schema subset: references inlined (a recursive schema cannot be),
    ``anyOf`` with a null branch turned into ``nullable``, ``const`` into a one-value enum, types in
    upper case, and property order kept (``propertyOrdering``)."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            raise UsageError(
                f"structured output: the schema is recursive at {_path(path)} ({ref}); Gemini's responseSchema "
                "(Gemini 1.x and 2.0 models) cannot express that: use a Gemini 2.5 or later model, or a "
                "schema without recursion"
            )
        target = _resolve(root, ref)
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _to_openapi(merged, root, path, seen | {ref})
    node = dict(node)
    branches = node.pop("anyOf", None) or node.pop("oneOf", None)
    if isinstance(branches, list):
        real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        nullable = len(real) < len(branches)
        if len(real) == 1:
            merged = {**real[0], **{k: v for k, v in node.items()}}
            out = _to_openapi(merged, root, path, seen)
        else:
            out = {k: v for k, v in node.items() if k in _OPENAPI_KEEP}
            out["anyOf"] = [_to_openapi(b, root, (*path, f"anyOf[{i}]"), seen) for i, b in enumerate(real)]
        if nullable:
            out["nullable"] = True
        return out
    if "const" in node:
        node["enum"] = [node.pop("const")]
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) < len(kind):
            node["nullable"] = True
        node["type"] = others[0] if others else "string"
    out = {}
    for k, v in node.items():
        if k not in _OPENAPI_KEEP:
            continue
        if k == "type" and isinstance(v, str):
            out[k] = v.upper()
        elif k == "enum" and isinstance(v, list):
            out[k] = [str(x) for x in v]
        elif k == "properties" and isinstance(v, dict):
            out[k] = {name: _to_openapi(sub, root, (*path, name), seen) for name, sub in v.items()}
            out["propertyOrdering"] = list(v)
        elif k == "items":
            out[k] = _to_openapi(v, root, (*path, "items"), seen)
        else:
            out[k] = v
    if "enum" in out:
        out["type"] = "STRING"
    return out


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise UsageError(f"structured output: only local references (#/...) are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise UsageError(f"structured output: the reference {ref!r} points at nothing in the schema")
    return node
