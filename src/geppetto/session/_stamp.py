"""Provenance stamping after an inference."""

from __future__ import annotations

from collections.abc import Iterable

from ..turns import BLOCK_META_INFERENCE_ID, TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, Turn

__all__ = ["stamp_inference"]


def stamp_inference(
    turn: Turn, *, session_id: str, inference_id: str, prior_ids: set[str], only: Iterable[int] | None = None
) -> None:
    """Stamp ``turn`` as the output of one inference.

    Turn metadata gets the session and inference ids. A block without ``turn_id`` gets ``turn.id``.
    A block created for this turn (its ``turn_id`` is ``turn.id``, or its id is not in ``prior_ids``,
    the blocks of earlier inferences) gets the block-level inference id unless it already has one.
    Reused blocks keep their stamps. ``only``: the positions that can hold such blocks, when the caller
    knows the others are unchanged blocks of earlier inferences.
    """
    TURN_META_SESSION_ID.set(turn.metadata, session_id)
    TURN_META_INFERENCE_ID.set(turn.metadata, inference_id)
    blocks = turn.blocks
    for block in blocks if only is None else (blocks[i] for i in only):
        if not block.turn_id:
            block.turn_id = turn.id
        created_here = block.turn_id == turn.id or block.id not in prior_ids
        if created_here and not BLOCK_META_INFERENCE_ID.has(block.metadata):
            BLOCK_META_INFERENCE_ID.set(block.metadata, inference_id)
