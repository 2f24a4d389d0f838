"""geppetto: provider-agnostic LLM inference on a Turn/Block data model.

>>> import geppetto as gp
>>> turn = gp.Turn()
>>> _ = turn.append(gp.Block.user("hello"))
"""

import logging as _logging
from typing import Any as _Any

from ._exceptions import (
    AuthenticationError,
    BadRequestError,
    ChainingWarning,
    ConfigurationError,
    GeppettoError,
    InferenceCancelled,
    KeyFormatError,
    MaxIterationsError,
    MetadataTypeError,
    NotFoundError,
    PrefixChangedError,
    PreviousResponseNotFoundError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    Retry,
    ServerError,
    SessionBusyError,
    StoreError,
    StreamError,
    ToolDefinitionError,
    TurnFormatError,
    UsageError,
    UsageLimitExceeded,
)
from .engine import Engine, Handler, run_sync
from .events import publish, with_sinks
from .middleware import Middleware, with_middleware
from .output import OutputValidationError, StructuredOutputConfig, output_config, output_of
from .session import ExecutionHandle, Session, SessionUsage, UsageLimits
from .session import use_model_strings as _use_model_strings
from .testing import FunctionEngine, ScriptedEngine
from .tools import (
    ApprovalPendingError,
    ApprovalPolicy,
    PendingCall,
    ToolContext,
    ToolDefinition,
    ToolRegistry,
    client_tool,
    tool,
)
from .turns import Block, BlockKind, Key, Turn, load_turn, save_turn

__all__ = [
    "ApprovalPendingError",
    "ApprovalPolicy",
    "AuthenticationError",
    "BadRequestError",
    "Block",
    "BlockKind",
    "ChainingWarning",
    "ConfigurationError",
    "Engine",
    "ExecutionHandle",
    "FunctionEngine",
    "GeppettoError",
    "Handler",
    "InferenceCancelled",
    "Key",
    "KeyFormatError",
    "MaxIterationsError",
    "MetadataTypeError",
    "Middleware",
    "NotFoundError",
    "OutputValidationError",
    "PendingCall",
    "PrefixChangedError",
    "PreviousResponseNotFoundError",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimitError",
    "Retry",
    "ScriptedEngine",
    "ServerError",
    "Session",
    "SessionBusyError",
    "SessionUsage",
    "StoreError",
    "StreamError",
    "StructuredOutputConfig",
    "ToolContext",
    "ToolDefinition",
    "ToolDefinitionError",
    "ToolRegistry",
    "Turn",
    "TurnFormatError",
    "UsageError",
    "UsageLimitExceeded",
    "UsageLimits",
    "client_tool",
    "engine_for",
    "load_turn",
    "output_config",
    "output_of",
    "publish",
    "run_sync",
    "save_turn",
    "tool",
    "with_middleware",
    "with_sinks",
]


def engine_for(model: str, **settings: _Any) -> Engine:
    """The engine a model string names (``"openai:gpt-4.1"``, ``"anthropic:claude-sonnet-4-5"``, ``"sim"``...):
    see :func:`geppetto.runtime.engine_for`, which this calls (imported on first use)."""
    from .runtime import engine_for as build

    return build(model, **settings)


# Session("provider:model") builds its engine here: the session layer sits below the profiles it needs.
_use_model_strings(engine_for)


def __getattr__(name: str) -> _Any:
    """``__version__``, read from the package metadata when first asked for (importlib.metadata is not
    loaded by ``import geppetto``: it costs more than the rest of the import)."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            value = version("geppetto")
        except PackageNotFoundError:  # a source tree that was never installed
            value = "0+unknown"
        globals()["__version__"] = value
        return value
    raise AttributeError(f"module 'geppetto' has no attribute {name!r}")


# A library logs and leaves the output to the application: without a handler of the application's, no
# record reaches Python's last-resort handler on stderr (which would print warnings inside a chat's answer).
_logging.getLogger("geppetto").addHandler(_logging.NullHandler())
