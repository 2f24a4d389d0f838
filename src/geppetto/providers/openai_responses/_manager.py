"""``ConversationManager``: one conversation's state kept across calls (seed 003, Proposal 5)."""

from __future__ import annotations

from geppetto.engine import Engine
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn

from ._state import ConversationState, get_state, set_state

__all__ = ["ConversationManager"]


class ConversationManager:
    """Carries a ``ConversationState`` from one call to the next, so a caller can build a *fresh* Turn
    each time, holding only the new blocks, and still continue the same chain or conversation.

    ``await manager.run(engine, turn)``: a Turn without state gets the managed one, with
    ``base`` = the last response (chained) or the conversation (conversation mode), so the engine
    sends all of its blocks after what the server already holds; a Turn that has its own state (one
    an engine returned) keeps it, and the engine's anchors apply. The state the engine records is kept
    for the next call. ``reset()`` starts over in the same mode.

    Example::

        manager = ConversationManager("chained")
        for question in ("Hi", "And then?"):
            turn = Turn()
            turn.append(Block.user(question))
            turn = await manager.run(engine, turn)   # the second request sends only "And then?"
    """

    def __init__(self, mode: str = "chained", *, conversation_id: str | None = None) -> None:
        self.state = ConversationState(mode=mode, conversation_id=conversation_id)

    def apply(self, turn: Turn) -> Turn:
        """Store the managed state in ``turn`` unless it has its own (a copy: the turn never aliases
        the manager). A Turn with no block from a response continues what the server holds."""
        if get_state(turn) is not None:
            return turn
        state = ConversationState.from_dict(self.state.to_dict())
        fresh = not any(b.metadata.get(str(BLOCK_META_RESPONSE_ID)) for b in turn.blocks)
        if fresh and state.mode == "chained":
            state.base = state.previous_response_id
        elif fresh and state.mode == "conversation":
            state.base = state.conversation_id
        set_state(turn, state)
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
