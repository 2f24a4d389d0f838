"""``ConversationManager``: one conversation's state kept across calls (seed 003, Proposal 5)."""

from __future__ import annotations

from geppetto.engine import Engine
from geppetto.turns import Turn

from ._state import ConversationState, get_state, set_state

__all__ = ["ConversationManager"]


class ConversationManager:
    """Carries a ``ConversationState`` from one Turn to the next, for callers who build fresh Turns.

    ``await manager.run(engine, turn)`` puts the state into the turn (unless the turn has its own), runs
    the engine and keeps the state the engine recorded. ``reset()`` starts over in the same mode.
    """

    def __init__(self, mode: str = "chained", *, conversation_id: str | None = None) -> None:
        self.state = ConversationState(mode=mode, conversation_id=conversation_id)

    def apply(self, turn: Turn) -> Turn:
        """Store the managed state in ``turn`` (a copy, so the turn never aliases the manager)."""
        set_state(turn, ConversationState.from_dict(self.state.to_dict()))
        return turn

    def update(self, turn: Turn) -> ConversationState:
        """Adopt the state the engine left in ``turn``."""
        state = get_state(turn)
        if state is not None:
            self.state = ConversationState.from_dict(state.to_dict())
        return self.state

    async def run(self, engine: Engine, turn: Turn) -> Turn:
        """Apply the state, run one inference, adopt the new state."""
        out = await engine.run_inference(self.apply(turn))
        self.update(out)
        return out

    def reset(self) -> None:
        """Forget the server objects; the next call starts a new chain or conversation."""
        self.state = ConversationState(mode=self.state.mode)
