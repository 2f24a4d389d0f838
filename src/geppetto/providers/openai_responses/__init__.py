"""OpenAI Responses engine with stateless, chained and conversation modes and response boundary tracking.

See ``docs/responses.md``: requests send only the blocks after an anchor when the server's stored
context provably equals the Turn up to it, and the whole Turn otherwise.
"""

from .._chain import blocks_after_response
from .._stateful import FALLBACK_REASONS, ResponsesMetrics, metrics
from ._engine import ResponsesEngine
from ._evidence import Verdict, endpoint_verdicts
from ._items import blocks_to_items
from ._request import find_best_anchor, is_valid_anchor
from ._state import RESPONSES_STATE, ConversationManager, ConversationState, get_state, set_state

__all__ = [
    "FALLBACK_REASONS",
    "RESPONSES_STATE",
    "ConversationManager",
    "ConversationState",
    "ResponsesEngine",
    "ResponsesMetrics",
    "Verdict",
    "blocks_after_response",
    "blocks_to_items",
    "endpoint_verdicts",
    "find_best_anchor",
    "get_state",
    "is_valid_anchor",
    "metrics",
    "set_state",
]
