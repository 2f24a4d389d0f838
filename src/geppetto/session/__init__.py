"""Sessions: an append-only history of turn snapshots, one inference at a time, provenance stamped."""

from ._session import ExecutionHandle, Session
from ._stamp import stamp_inference
from ._store import EventLogStore, MemoryTurnStore, RecordedEvent, TurnStore

__all__ = [
    "EventLogStore",
    "ExecutionHandle",
    "MemoryTurnStore",
    "RecordedEvent",
    "Session",
    "TurnStore",
    "stamp_inference",
]
