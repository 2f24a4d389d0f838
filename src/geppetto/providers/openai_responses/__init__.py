"""OpenAI Responses engine with stateless, chained and conversation modes and response boundary tracking.

See ``docs/responses.md``: requests send only the blocks after an anchor when the server's stored
context provably equals the Turn up to it, and the whole Turn otherwise.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the plan
the inspector and a session's request totals show, the size of a Turn's items, ``geppetto probe``, the
default base URL, the kill switch and the metrics' definitions the exporters build their instruments from.
Not part of the public API; they may change in any release.
"""

from .._chain import blocks_after_response
from .._stateful import CHAINING_ENV as CHAINING_ENV
from .._stateful import FALLBACK_REASONS, ResponsesMetrics, metrics
from .._stateful import GAUGES as GAUGES
from .._stateful import METRICS as METRICS
from .._stateful import chaining_enabled as chaining_enabled
from ._context import probe as probe
from ._engine import DEFAULT_BASE_URL as DEFAULT_BASE_URL
from ._engine import ResponsesEngine
from ._evidence import Verdict, endpoint_verdicts
from ._items import blocks_to_items
from ._items import items_bytes as items_bytes
from ._items import items_sizes as items_sizes
from ._request import find_best_anchor, is_valid_anchor
from ._request import plan_chained as plan_chained
from ._request import plan_request as plan_request
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
