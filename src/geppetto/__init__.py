"""geppetto: provider-agnostic LLM inference on a Turn/Block data model.

>>> import geppetto as gp
>>> turn = gp.Turn()
>>> _ = turn.append(gp.Block.user("hello"))
"""

from ._exceptions import (
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    GeppettoError,
    InferenceCancelled,
    KeyFormatError,
    MaxIterationsError,
    MetadataTypeError,
    NotFoundError,
    PreviousResponseNotFoundError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
    SessionBusyError,
    StoreError,
    StreamError,
    ToolDefinitionError,
    TurnFormatError,
    UsageError,
)
from .engine import Engine, Handler, run_sync
from .events import publish, with_sinks
from .middleware import Middleware, with_middleware
from .testing import FunctionEngine, ScriptedEngine
from .turns import Block, BlockKind, Key, Turn, load_turn, save_turn

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "Block",
    "BlockKind",
    "ConfigurationError",
    "Engine",
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
    "PreviousResponseNotFoundError",
    "ProviderConnectionError",
    "ProviderError",
    "RateLimitError",
    "ScriptedEngine",
    "ServerError",
    "SessionBusyError",
    "StoreError",
    "StreamError",
    "ToolDefinitionError",
    "Turn",
    "TurnFormatError",
    "UsageError",
    "load_turn",
    "publish",
    "run_sync",
    "save_turn",
    "with_middleware",
    "with_sinks",
]
