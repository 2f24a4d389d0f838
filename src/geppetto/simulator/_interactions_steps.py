"""Gemini Interactions API bodies and the scripted model: the context's steps as the model's messages,
the request's tools, tool choice and schema, and the model's answer as steps (a thought with its signature,
the model output, function calls) with its usage. The request's checks are in ``_interactions_rules``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._attachments import framed_file
from ._gemini import _call_id
from ._interactions_files import interactions_files
from ._model import Msg, Reply, ToolSpec, is_reasoning_model, reasoning_summary
from ._prompt_cache import Segment, cache_use
from ._state import SimState
from ._tokens import count_items, count_text, count_value

__all__ = [
    "context_digest",
    "interaction_usage",
    "output_steps",
    "reasoning_on",
    "request_choice",
    "request_schema",
    "request_tools",
    "to_msgs",
]

DEFAULT_THOUGHT = "Thinking about the request."


def reasoning_on(model: str, body: dict[str, Any]) -> bool:
    """Whether the model thinks (and signs its thoughts): Gemini 3 and reasoning models always, any other
    model given a thinking level above ``minimal``."""
    config = body.get("generation_config") or {}
    level = config.get("thinking_level") if isinstance(config, dict) else None
    chosen = level is not None and level != "minimal"
    return chosen or is_reasoning_model(model) or model.removeprefix("models/").startswith("gemini-3")


def _text_of(contents: Any) -> str:
    if isinstance(contents, str):
        return contents
    parts = contents if isinstance(contents, list) else [contents]
    return "".join(str(c.get("text") or "") for c in parts if isinstance(c, dict) and c.get("type") == "text")


def to_msgs(body: dict[str, Any], steps: list[dict[str, Any]]) -> list[Msg]:
    """The neutral model view of the context steps (thoughts are not read back)."""
    system = body.get("system_instruction")
    msgs = [Msg("system", system)] if isinstance(system, str) and system else []
    for step in steps:
        kind = step.get("type")
        if kind == "user_input":
            contents = step.get("content") or []
            files = interactions_files(contents)
            if files:  # a framed text file is an attachment, not the prompt
                contents = [c for c in contents if not (isinstance(c, dict) and framed_file(c))]
            msgs += [Msg("user", _text_of(contents)), *files]
        elif kind == "model_output":
            msgs.append(Msg("assistant", _text_of(step.get("content") or [])))
        elif kind == "function_call":
            msgs.append(Msg("call", json.dumps(step.get("arguments")), str(step.get("name")), str(step.get("id"))))
        elif kind == "function_result":
            result = step.get("result")
            text = result if isinstance(result, str) else _text_of(result) if isinstance(result, list) else ""
            msgs.append(Msg("result", text or json.dumps(result), call_id=str(step.get("call_id"))))
    return msgs


def request_tools(body: dict[str, Any]) -> list[ToolSpec]:
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"]
    return [
        ToolSpec(str(t.get("name")), str(t.get("description") or ""), dict(t.get("parameters") or {})) for t in tools
    ]


def request_choice(body: dict[str, Any]) -> str:
    choice = (body.get("generation_config") or {}).get("tool_choice", "auto")
    if isinstance(choice, dict):
        allowed = choice.get("allowed_tools") or {}
        names = allowed.get("tools") or []
        mode = allowed.get("mode", "auto")
        if mode in ("any", "validated"):
            return str(names[0]) if len(names) == 1 else "required"
        return "none" if mode == "none" else "auto"
    return {"any": "required", "validated": "required", "none": "none"}.get(str(choice), "auto")


def request_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the answer must follow: ``response_format`` as a text format with ``mime_type``
    ``application/json`` (and a ``schema``), or the older raw schema with ``response_mime_type``."""
    formats = body.get("response_format")
    for fmt in formats if isinstance(formats, list) else [formats]:
        if isinstance(fmt, dict) and fmt.get("type") == "text" and fmt.get("mime_type") == "application/json":
            schema = fmt.get("schema")
            return schema if isinstance(schema, dict) else {"type": "object"}
    if body.get("response_mime_type") == "application/json":
        return formats if isinstance(formats, dict) else {"type": "object"}
    return None


def context_digest(context: list[dict[str, Any]]) -> str:
    """The digest of the steps a thought was made after, without their signatures (and a result's optional
    name): what a later replay of the thought is compared with (see ``_interactions_rules.stale_signatures``)."""
    bare = [
        {k: v for k, v in s.items() if k != "signature" and not (k == "name" and s.get("type") == "function_result")}
        for s in context
    ]
    return hashlib.sha256(json.dumps(bare, sort_keys=True).encode()).hexdigest()


def output_steps(
    state: SimState,
    body: dict[str, Any],
    reply: Reply,
    reasoning: bool,
    msgs: list[Msg],
    context: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The model's steps: a signed thought when it thinks (its summary when asked for or scripted), the
    text as a model output, then each function call with an id. The signature seals the digest of
    ``context`` (the steps before the thought) with the steps it goes with."""
    steps: list[dict[str, Any]] = []
    if reply.text is not None:
        steps.append({"type": "model_output", "content": [{"type": "text", "text": reply.text}]})
    for call in reply.tool_calls:
        args = call.args if isinstance(call.args, dict) else {"input": call.args}
        steps.append({"type": "function_call", "id": call.call_id or _call_id(), "name": call.name, "arguments": args})
    config = body.get("generation_config") or {}
    if reasoning or reply.reasoning is not None:
        thought: dict[str, Any] = {"type": "thought"}
        if reply.reasoning is not None or config.get("thinking_summaries") == "auto":
            summary = reply.reasoning or reasoning_summary(msgs, reply) or DEFAULT_THOUGHT
            thought["summary"] = [{"type": "text", "text": summary}]
        if reasoning:
            sealed = {"after": context_digest(context or []), "steps": steps}
            thought["signature"] = state.seal("gemini", "signature", json.dumps(sealed, sort_keys=True))
        steps.insert(0, thought)
    return steps


def interaction_usage(
    state: SimState, body: dict[str, Any], model: str, context: list[dict[str, Any]], steps: list[dict[str, Any]]
) -> dict[str, Any]:
    """Token usage: the whole context counts as input (part of it read from the implicit cache when a
    previous request had the same prefix), the visible steps as output, the thought as thought tokens."""
    system = body.get("system_instruction")
    prompt = count_items(context) + (count_value(system) if system else 0)
    thoughts = sum(count_text(str(c.get("text") or "")) for s in steps for c in s.get("summary") or [])
    if any(s["type"] == "thought" for s in steps) and not thoughts:
        thoughts = count_text(DEFAULT_THOUGHT)  # it thinks whether or not it shows the summary
    output = sum(count_value(s) for s in steps if s["type"] != "thought")
    segments = [Segment([body.get("tools"), system], count_value(system) if system else 0)]
    cached = cache_use(state, model, segments + [Segment(s, count_items([s])) for s in context], implicit=True)
    usage: dict[str, Any] = {
        "total_input_tokens": prompt,
        "input_tokens_by_modality": [{"modality": "text", "tokens": prompt}],
        "total_output_tokens": output,
        "output_tokens_by_modality": [{"modality": "text", "tokens": output}],
        "total_tokens": prompt + output + thoughts,
    }
    if thoughts:
        usage["total_thought_tokens"] = thoughts
    if cached.read:
        usage["total_cached_tokens"] = cached.read
    return usage
