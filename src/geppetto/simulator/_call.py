"""The request an API handler gets: the parsed body, the simulator's state and the fault asked for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.types import ASGIApp

from ._faults import Fault
from ._state import SimState

__all__ = ["Call", "Handler"]


@dataclass
class Call:
    """One parsed request handed to an API handler."""

    request: Request
    body: Any
    state: SimState
    fault: Fault | None
    api: str
    effects: dict[str, Any] = field(default_factory=dict)
    """The request log entry's ``effects`` (see :class:`~geppetto.simulator.RecordedRequest`)."""

    def obj(self) -> dict[str, Any]:
        """The body as a JSON object (the wrapper guarantees it for POST requests)."""
        return self.body if isinstance(self.body, dict) else {}


Handler = Callable[[Call], Awaitable[ASGIApp]]
