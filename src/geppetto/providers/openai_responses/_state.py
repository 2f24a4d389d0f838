"""Conversation state for the Responses engine, stored in ``Turn.data`` (seed 003, Proposal 6)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from geppetto._exceptions import ConfigurationError
from geppetto.turns import Turn, turn_data_key

__all__ = ["MODES", "RESPONSES_STATE", "ConversationState", "get_state", "set_state"]

MODES = ("stateless", "chained", "conversation")


@dataclass
class ConversationState:
    """How a turn talks to the Responses API.

    ``mode``: ``stateless`` (the whole Turn every request), ``chained`` (``previous_response_id`` = the
    anchor, input = blocks after it) or ``conversation`` (a server conversation holds the context).
    ``conversation_id`` and ``previous_response_id`` record the server objects the last request used;
    the engine writes them after every call and never reads ``previous_response_id`` as an instruction.

    ``base`` is set when the Turn does not hold the whole context: it names the server object whose
    context comes before the Turn's first block (a response id in chained mode, the conversation id in
    conversation mode). A Turn with a ``base`` and no block from a response is a *fresh* Turn: all its
    blocks are new to the server and are sent after ``base``. ``ConversationManager`` sets it on the
    fresh Turns it is given; the engine keeps it while it answers that Turn.
    """

    mode: str = "chained"
    conversation_id: str | None = None
    previous_response_id: str | None = None
    base: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(f"unknown Responses mode {self.mode!r}; use one of {', '.join(MODES)}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form kept in ``Turn.data`` (``base`` only when set)."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "conversation_id": self.conversation_id,
            "previous_response_id": self.previous_response_id,
        }
        if self.base is not None:
            out["base"] = self.base
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConversationState:
        """Read the JSON form back."""
        return cls(
            mode=str(data.get("mode") or "chained"),
            conversation_id=data.get("conversation_id"),
            previous_response_id=data.get("previous_response_id"),
            base=data.get("base"),
        )


RESPONSES_STATE = turn_data_key("openai", "responses_state", 1, ConversationState)
"""Turn data key ``openai.responses_state@v1`` holding the ``ConversationState``."""


def get_state(turn: Turn) -> ConversationState | None:
    """The turn's conversation state, or None when it has none."""
    return RESPONSES_STATE.get(turn.data)


def set_state(turn: Turn, state: ConversationState) -> None:
    """Store ``state`` in ``turn.data``."""
    RESPONSES_STATE.set(turn.data, state)
