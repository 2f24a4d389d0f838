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

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the
validators a session runs and the middleware's refusal check. Not part of the public API.
"""

from __future__ import annotations

from ._build import output_block, output_config, output_of, retry_prompt
from ._check import READ_FROM_TURN, check_output, settle_output
from ._check import _jsonschema_validator as _jsonschema_validator  # as before the split
from ._config import (
    BLOCK_META_OUTPUT,
    BLOCK_META_OUTPUT_ERRORS,
    STRUCTURED_OUTPUT,
    OutputValidationError,
    StructuredOutputConfig,
)
from ._config import MODES as MODES
from ._config import WRAP_KEY as WRAP_KEY
from ._validators import Validator as Validator
from ._validators import refusal as refusal
from ._validators import validating as validating
from ._wire import Dialect, wire_schema, wire_schema_encoded

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
