"""What the answer must look like: :class:`StructuredOutputConfig`, the keys it and the answer are kept
under, :class:`OutputValidationError`, and the check a schema passes once per content."""

from __future__ import annotations

import contextlib
import json
import operator
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .._exceptions import GeppettoError, UsageError
from .._output_schema import check_schema, schema_too_deep
from ..turns import Turn, block_meta_key, turn_data_key

MODES = ("auto", "native", "tool")
WRAP_KEY = "value"
"""The property a non-object answer is wrapped in on the wire (providers want an object at the root)."""

_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

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


def _unwrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema of the answer inside a wrapped schema (see :func:`_wrap`), as its own document."""
    inner = schema.get("properties", {}).get(WRAP_KEY)
    inner = dict(inner) if isinstance(inner, dict) else {}
    if "$defs" in schema:
        inner["$defs"] = schema["$defs"]
    return inner


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
