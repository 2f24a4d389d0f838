"""Gemini Interactions API bodies and the scripted model: the request's checks, its input as steps, the
steps as the model's messages, and the model's answer as steps (thought with its signature, model output,
function calls) with its usage.

Texts the service's documentation does not give are marked ``unverified`` where they are raised.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ._errors import SimError
from ._gemini import _call_id
from ._gemini_rules import PLACEHOLDER_SIGNATURES
from ._model import Msg, Reply, ToolSpec, is_reasoning_model, reasoning_summary
from ._prompt_cache import Segment, cache_use
from ._state import SimState
from ._tokens import count_items, count_text, count_value

__all__ = [
    "check_request",
    "check_results",
    "check_signatures",
    "input_steps",
    "interaction_usage",
    "output_steps",
    "reasoning_on",
    "request_choice",
    "request_schema",
    "request_tools",
    "to_msgs",
]

_FIELDS = frozenset(
    {
        "model",
        "agent",
        "agent_config",
        "background",
        "cached_content",
        "continuation_token",
        "environment",
        "generation_config",
        "input",
        "labels",
        "previous_interaction_id",
        "response_format",
        "response_mime_type",
        "response_modalities",
        "safety_settings",
        "service_tier",
        "store",
        "stream",
        "system_instruction",
        "tools",
        "webhook_config",
    }
)
_STEP_TYPES = frozenset({"user_input", "model_output", "function_call", "function_result", "thought"})
_CONTENT_TYPES = frozenset({"text", "image", "audio", "document", "video"})
DEFAULT_THOUGHT = "Thinking about the request."


def invalid(message: str, code: str = "invalid_request") -> SimError:
    """A 400 in the Interactions API's terms."""
    return SimError(400, message, code=code)


def check_request(body: dict[str, Any]) -> None:
    """The service's checks of a create request's fields and their JSON types; raises its 400."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise invalid(f"Unknown parameter: '{unknown[0]}'.", "parameter_unknown")  # unverified text
    if "agent" in body:
        raise invalid("The simulator serves model interactions only: give 'model' instead of 'agent'.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise invalid("'model' is required: name the model to interact with.")  # unverified text
    if body.get("input") is None:
        raise invalid("'input' is required.")  # unverified text
    for name in ("store", "stream", "background"):
        if name in body and not isinstance(body[name], bool):
            raise invalid(f"Invalid value for '{name}': expected a boolean.")  # unverified text
    for name in ("previous_interaction_id", "system_instruction"):
        if name in body and not isinstance(body[name], str):
            raise invalid(f"Invalid value for '{name}': expected a string.")  # unverified text
    if "tools" in body and not isinstance(body["tools"], list):
        raise invalid("Invalid value for 'tools': expected a list of tools.")  # unverified text


def input_steps(value: Any) -> list[dict[str, Any]]:
    """The request's ``input`` as steps: a string or content(s) become one ``user_input`` step; a list of
    steps is kept as given."""
    if isinstance(value, str):
        return [{"type": "user_input", "content": [{"type": "text", "text": value}]}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        raise invalid("'input' must be a string, a content, or a non-empty list of contents or of steps.")
    kinds = [item.get("type") for item in value]
    if all(kind in _STEP_TYPES for kind in kinds):
        for index, step in enumerate(value):
            _check_step(step, index)
        return copy.deepcopy(value)
    if all(kind in _CONTENT_TYPES for kind in kinds):
        return [{"type": "user_input", "content": copy.deepcopy(value)}]
    bad = next(i for i, kind in enumerate(kinds) if kind not in _STEP_TYPES and kind not in _CONTENT_TYPES)
    raise invalid(  # unverified text
        f"input[{bad}]: unknown type {kinds[bad]!r}; give steps ({', '.join(sorted(_STEP_TYPES))}) or contents "
        f"({', '.join(sorted(_CONTENT_TYPES))}), not a mix."
    )


def _check_step(step: dict[str, Any], index: int) -> None:
    kind = step["type"]
    required = {"function_call": ("id", "name", "arguments"), "function_result": ("call_id", "result")}.get(kind, ())
    for name in required:
        if step.get(name) is None:
            raise invalid(f"input[{index}]: a {kind} step needs '{name}'.")  # unverified text
    if kind == "thought" and step.get("signature") is not None and not isinstance(step["signature"], str):
        raise invalid(f"input[{index}].signature: expected a base64 string.")  # unverified text


def reasoning_on(model: str, body: dict[str, Any]) -> bool:
    """Whether the model thinks (and signs its thoughts): Gemini 3 and reasoning models, or a thinking level."""
    config = body.get("generation_config") or {}
    level = config.get("thinking_level") if isinstance(config, dict) else None
    if level == "minimal":
        return False
    return level is not None or is_reasoning_model(model) or model.removeprefix("models/").startswith("gemini-3")


def check_signatures(state: SimState, steps: list[dict[str, Any]], reasoning: bool) -> None:
    """Thought signatures sent back must be the simulator's (or a documented placeholder); when the model
    thinks, each model run of the current turn that calls a function must carry its signed thought."""
    for step in steps:
        signature = step.get("signature") if step.get("type") == "thought" else None
        known = signature is None or signature in PLACEHOLDER_SIGNATURES
        if not known and state.unseal("gemini", str(signature)) is None:
            raise invalid("Corrupted thought signature.")  # generateContent's text; unverified here
    if not reasoning:
        return
    last_user = max((i for i, s in enumerate(steps) if s.get("type") == "user_input"), default=-1)
    signed = False
    for step in steps[last_user + 1 :]:
        kind = step.get("type")
        if kind == "function_result":
            signed = False  # the next model run starts
        elif kind == "thought" and step.get("signature"):
            signed = True
        elif kind == "function_call" and not signed:
            raise invalid(  # unverified text, after generateContent's
                f"Function call `{step.get('name')}` is missing its thought signature: send back the thought "
                "step (with its signature) that preceded it. See https://ai.google.dev/gemini-api/docs/thought-signatures."
            )


def check_results(context: list[dict[str, Any]]) -> None:
    """Each function result must answer a function call earlier in the context (held or sent)."""
    calls: set[str] = set()
    for step in context:
        if step.get("type") == "function_call":
            calls.add(str(step.get("id")))
        elif step.get("type") == "function_result" and str(step.get("call_id")) not in calls:
            raise invalid(  # unverified text
                f"No function call found for the function_result with call_id '{step.get('call_id')}': send it "
                "after its function_call, or continue the interaction that made the call."
            )


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
            msgs.append(Msg("user", _text_of(step.get("content") or [])))
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


def output_steps(
    state: SimState, body: dict[str, Any], reply: Reply, reasoning: bool, msgs: list[Msg]
) -> list[dict[str, Any]]:
    """The model's steps: a signed thought when it thinks (its summary when asked for or scripted), the
    text as a model output, then each function call with an id."""
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
            thought["signature"] = state.seal("gemini", "signature", json.dumps(steps, sort_keys=True))
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
