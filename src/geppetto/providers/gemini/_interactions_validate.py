"""``InteractionsEngine.validate``: read the history the server holds behind the Turn's anchor (the anchor
and the interactions before it, by ``previous_interaction_id``) and compare it with the Turn's steps. The
proof already says they are equal; this asks the server, for an audit or after a suspected fault. On a
mismatch no interaction of the chain is trusted again: the next request sends the whole Turn (reason
``not_anchorable``). The result is the Responses engine's :class:`Validation`, counted in the same metrics.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from ...turns import BLOCK_META_RESPONSE_ID, Turn
from .._chain import scan_chain
from .._stateful import ResponsesMetrics, Validation
from ._interactions_steps import WIRE, blocks_to_steps, chain_seed, get_interactions_state

__all__ = ["MISMATCH", "validate_interactions"]

log = logging.getLogger("geppetto.providers.gemini.interactions")

MISMATCH = "the server's history differs from the Turn"


class _Reader(Protocol):
    """What validating needs of the engine: its ``get`` and its metrics (``InteractionsEngine`` has both)."""

    metrics: ResponsesMetrics

    async def get(self, interaction_id: str) -> dict[str, Any]: ...


_KEPT = ("type", "name", "arguments", "call_id", "result", "is_error", "signature")


def _visible(step: dict[str, Any]) -> tuple[Any, ...]:
    """A step reduced to what the model reads (server-side fields and content shapes left out)."""
    parts = [(c.get("type"), c.get("text") or c.get("data") or c.get("uri")) for c in step.get("content") or ()]
    summary = [c.get("text") for c in step.get("summary") or ()]
    return (*(step.get(k) for k in _KEPT), tuple(parts), tuple(summary))


async def validate_interactions(engine: _Reader, turn: Turn) -> Validation:
    """Compare the server's history at the Turn's anchor with the Turn (see the module text)."""
    state = get_interactions_state(turn)
    scan = scan_chain(turn, WIRE, seed=chain_seed(state), incremental=True)
    anchor = scan.best()
    if anchor is None:
        return Validation(None, None, "no anchor: the next request sends the whole Turn")
    mine = [_visible(s) for s in blocks_to_steps(list(turn.blocks[: scan.spans[anchor].last + 1]))]
    base = state.base if state is not None else None
    links: list[list[dict[str, Any]]] = []
    iid: str | None = anchor
    while iid and iid != base:
        interaction = await engine.get(iid)
        links.append([s for s in interaction.get("steps") or () if isinstance(s, dict)])
        iid = str(interaction.get("previous_interaction_id") or "") or None
    theirs = [_visible(s) for link in reversed(links) for s in link]
    result = Validation(anchor, theirs == mine, requests=len(links), server=theirs, turn=mine)
    if result.matches:
        engine.metrics.validation("match")
        return result
    at = next((i for i, (a, b) in enumerate(zip(theirs, mine, strict=False)) if a != b), min(len(theirs), len(mine)))
    result.detail = f"{MISMATCH} at step {at}; the next request sends the whole Turn"
    log.warning("interactions: %s (interaction %s)", result.detail, anchor)
    engine.metrics.validation("mismatch")
    for block in turn.blocks:  # no interaction of this chain is trusted again
        if block.metadata.get(str(BLOCK_META_RESPONSE_ID)):
            block.metadata[WIRE.refused_key] = MISMATCH
    return result
