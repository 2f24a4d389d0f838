"""The JSON body of one ``POST /v1/responses`` request, from a plan and the engine's settings."""

from __future__ import annotations

from typing import Any

from geppetto.output import wire_schema_encoded
from geppetto.turns import BlockKind, Turn

from ._cache import prompt_cache_key_for
from ._plan import Plan

__all__ = ["COUNT_FIELDS", "build_body"]

COUNT_FIELDS = frozenset(
    {
        "model",
        "input",
        "previous_response_id",
        "conversation",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "reasoning",
    }
)
"""The fields of a create request that ``POST /responses/input_tokens`` takes (``TokenCountsBody``)."""


def build_body(engine: Any, turn: Turn, plan: Plan) -> dict[str, Any]:
    """The JSON body ``engine`` (a ``ResponsesEngine``: its settings) sends for ``plan`` (see its ``build_body``)."""
    body: dict[str, Any] = {"model": engine.model}
    if engine.instructions_mode:
        system = [b.text for b in turn.blocks if b.kind is BlockKind.SYSTEM and b.text]
        if system:
            body["instructions"] = "\n\n".join(system)
    body["input"] = plan.items
    if plan.previous_response_id:
        body["previous_response_id"] = plan.previous_response_id
    if plan.conversation_id:
        body["conversation"] = plan.conversation_id
    body.update(engine._tools.fields(turn, engine.tool_choice))
    optional: dict[str, Any] = {
        "parallel_tool_calls": engine.parallel_tool_calls,
        "text": _text(engine, turn),
        "max_output_tokens": engine.max_output_tokens,
        "prompt_cache_key": prompt_cache_key_for(engine.prompt_cache_key, turn),
        "prompt_cache_retention": engine.prompt_cache_retention,
    }
    if not engine.is_reasoning_model():
        optional.update(temperature=engine.temperature, top_p=engine.top_p)
    effort, summary = engine.reasoning_effort, engine.reasoning_summary
    reasoning = {k: v for k, v in (("effort", effort), ("summary", summary)) if v}
    optional["reasoning"] = reasoning or None
    body.update({k: v for k, v in optional.items() if v is not None})
    if engine.compact_threshold is not None:
        body["context_management"] = [{"type": "compaction", "compact_threshold": engine.compact_threshold}]
    include = list(engine.include)
    if engine.background:
        body["background"] = body["store"] = True  # background responses must be stored
    if not engine.store:
        body["store"] = False
        if "reasoning.encrypted_content" not in include:
            include.append("reasoning.encrypted_content")
    if include:
        body["include"] = include
    body["stream"] = engine.stream
    return body


def _text(engine: Any, turn: Turn) -> dict[str, Any] | None:
    """``text.format``: the Turn's structured-output config, else the engine's ``text_format``."""
    output = engine._output_of(turn)
    if output is None:
        return {"format": engine.text_format} if engine.text_format else None
    fmt: dict[str, Any] = {"type": "json_schema", "name": output.name}
    if output.description:
        fmt["description"] = output.description
    fmt.update(schema=wire_schema_encoded(output, "openai"), strict=output.strict)
    return {"format": fmt}
