"""Gemini API: ``GeminiEngine`` (generateContent endpoint), ``build_request`` and ``GeminiStreamReducer``
(dialect); ``InteractionsEngine`` (the Interactions API, chained under the shared anchor proof).

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the plan
of an Interactions request the inspector shows. Not part of the public API; it may change in any release.
"""

from . import _server_tools as server_tools
from ._dialect import (
    FOREIGN_CALL_SIGNATURE,
    build_contents,
    build_request,
    model_path,
    needs_signed_calls,
    sign_current_turn,
)
from ._engine import API_VERSION, DEFAULT_BASE_URL, GeminiEngine
from ._interactions import InteractionsEngine
from ._interactions_plan import InteractionPlan
from ._interactions_plan import plan_interaction as plan_interaction
from ._interactions_steps import (
    INTERACTIONS_STATE,
    InteractionsState,
    get_interactions_state,
    set_interactions_state,
)
from ._parts import PROVIDER
from ._stream import GeminiStreamReducer, gemini_stop_reason, gemini_usage

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "FOREIGN_CALL_SIGNATURE",
    "INTERACTIONS_STATE",
    "PROVIDER",
    "GeminiEngine",
    "GeminiStreamReducer",
    "InteractionPlan",
    "InteractionsEngine",
    "InteractionsState",
    "build_contents",
    "build_request",
    "gemini_stop_reason",
    "gemini_usage",
    "get_interactions_state",
    "model_path",
    "needs_signed_calls",
    "server_tools",
    "set_interactions_state",
    "sign_current_turn",
]
