"""OpenAI Responses: ``POST /v1/responses/input_tokens``, the count a create request would report."""

from __future__ import annotations

import copy

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._call import Call
from ._errors import SimError
from ._openai import _conversation_id, chain_items, conversation_or_404
from ._openai_compaction import prune
from ._openai_items import check_context, normalize_input
from ._openai_out import input_tokens
from ._validate import validate

__all__ = ["count_input_tokens"]


async def count_input_tokens(call: Call) -> ASGIApp:
    """POST /v1/responses/input_tokens: the tokens a create request with this body would read (the
    context after ``previous_response_id`` or ``conversation``, pruned at its latest compaction)."""
    body = call.obj()
    validate("TokenCountsBody", body)
    state = call.state
    prev = body.get("previous_response_id")
    conv_id = _conversation_id(body.get("conversation"))
    if prev and conv_id:
        raise SimError(
            400,
            "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.",
            code="mutually_exclusive_parameters",
        )
    with state.lock:
        prefix = chain_items(state, str(prev)) if prev else []
        if conv_id:
            prefix = copy.deepcopy(conversation_or_404(state, conv_id).items)
        context = prefix + normalize_input(state, body.get("input"))
        check_context(state, context)
        context = prune(state, context)
    instructions = body.get("instructions") if isinstance(body.get("instructions"), str) else None
    return JSONResponse({"object": "response.input_tokens", "input_tokens": input_tokens(context, instructions)})
