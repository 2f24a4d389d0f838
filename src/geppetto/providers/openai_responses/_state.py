"""The Responses engine's state: what a Turn says about how it talks to the server (``ConversationState``,
kept in ``Turn.data``), a manager that keeps one conversation's state across calls, and reading back a list
the server holds (a conversation's items, a response's input items), reduced to what the model reads.

See docs/responses.md ("Modes").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from geppetto._exceptions import ConfigurationError
from geppetto._json import parse_json
from geppetto.engine import Engine
from geppetto.turns import (
    BLOCK_META_RESPONSE_ID,
    TURN_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    Turn,
    turn_data_key,
)

from ._items import content_text

__all__ = [
    "MODES",
    "RESPONSES_STATE",
    "ConversationManager",
    "ConversationState",
    "Reader",
    "get_state",
    "list_items",
    "set_state",
    "turn_ids",
    "visible",
]


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


def turn_ids(turn: Turn) -> str:
    """``session=s1 turn=t1 inference=i1`` for a warning (an id not set shows as ``-``), so a fallback in the
    log leads to its session's stored snapshots and event log."""
    session = TURN_META_SESSION_ID.get(turn.metadata) or "-"
    inference = TURN_META_INFERENCE_ID.get(turn.metadata) or "-"
    return f"session={session} turn={turn.id or '-'} inference={inference}"


# -- manager -------------------------------------------------------------------------------------------------
# ``ConversationManager``: one conversation's state kept across calls.


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


# -- listing -------------------------------------------------------------------------------------------------
# Reading a server's stored items and reducing them to what the model reads (validation and repair).


class Reader(Protocol):
    """What reading a list needs of an engine's ``Api``."""

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


_PAGE = 100


def _args(raw: Any) -> Any:
    try:
        return parse_json(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def visible(item: dict[str, Any]) -> tuple[Any, ...]:
    """An input or stored item reduced to what the model reads (server ids, statuses and content shapes
    dropped; reasoning, references and items geppetto does not model count by id)."""
    kind = item.get("type") or ("message" if "role" in item else "item_reference")
    if kind == "message":
        return ("message", item.get("role"), content_text(item.get("content")))
    if kind == "function_call":
        return ("function_call", item.get("call_id"), item.get("name"), _args(item.get("arguments")))
    if kind == "function_call_output":
        return ("function_call_output", item.get("call_id"), content_text(item.get("output")))
    if kind in ("reasoning", "item_reference"):
        return ("reasoning", item.get("id"))
    return (kind, item.get("id"))


async def list_items(api: Reader, path: str) -> tuple[list[dict[str, Any]], int]:
    """Every item of a list endpoint (``order=asc``), page by page, and the number of reads it took."""
    items: list[dict[str, Any]] = []
    after: str | None = None
    reads = 0
    while True:
        params: dict[str, Any] = {"order": "asc", "limit": _PAGE}
        if after:
            params["after"] = after
        page = await api.get(path, params)
        reads += 1
        data = page.get("data") if isinstance(page, dict) else None
        items.extend(i for i in data or [] if isinstance(i, dict))
        if not (isinstance(page, dict) and page.get("has_more") and page.get("last_id")):
            return items, reads
        after = str(page["last_id"])
