"""Sessions: an append-only history of turn snapshots, one inference at a time, provenance stamped."""

from ._collector import freeze_collector
from ._session import ExecutionHandle, Session
from ._stamp import stamp_inference
from ._store import EventLogStore, MemoryTurnStore, RecordedEvent, TurnStore
from ._stream import InferenceStream
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
