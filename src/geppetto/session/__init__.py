"""Sessions: an append-only history of turn snapshots, one inference at a time, provenance stamped.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the hooks
a server and the tracing package install, the request totals the web dashboard reads, and the steps the server
takes to resume or go on with a session it restored. Not part of the public API; they may change in any
release.
"""

from ._approvals import prepare_resume as prepare_resume
from ._collector import freeze_collector
from ._journal import prepare_go_on as prepare_go_on
from ._requests import last_index as last_index
from ._requests import session_requests as session_requests
from ._requests import session_totals as session_totals
from ._session import INCOMING_HOOKS as INCOMING_HOOKS
from ._session import RUN_HOOKS as RUN_HOOKS
from ._session import ExecutionHandle, Session
from ._session import use_model_strings as use_model_strings
from ._stamp import stamp_inference
from ._store import EventLogStore, MemoryTurnStore, RecordedEvent, TurnStore
from ._stream import InferenceStream
from ._totals import dashboard as dashboard
from ._totals import totals as totals
from ._usage import (
    TURN_META_INFERENCE_USAGE,
    TURN_META_SESSION_USAGE,
    TURN_META_STOPPED_BY_LIMIT,
    SessionUsage,
    UsageLimits,
    UsageMeter,
)

__all__ = [
    "TURN_META_INFERENCE_USAGE",
    "TURN_META_SESSION_USAGE",
    "TURN_META_STOPPED_BY_LIMIT",
    "EventLogStore",
    "ExecutionHandle",
    "InferenceStream",
    "MemoryTurnStore",
    "RecordedEvent",
    "Session",
    "SessionUsage",
    "TurnStore",
    "UsageLimits",
    "UsageMeter",
    "freeze_collector",
    "stamp_inference",
]
